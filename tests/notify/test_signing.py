"""Standard Webhooks signatures: the spec's own test vector, secrets from file or env, never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwatch.notify import SecretError, load_secret, new_secret, parse_secret, verify
from gpuwatch.notify.signing import signed_headers

# The example from the Standard Webhooks specification and its reference libraries.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID, SPEC_TS, SPEC_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_signature_matches_the_specification_example() -> None:
    assert parse_secret(SPEC_SECRET).sign(SPEC_ID, SPEC_TS, SPEC_BODY) == SPEC_SIGNATURE


@pytest.mark.parametrize(("change", "accepted"), [
    ({}, True),
    ({"body": b'{"test": 1}'}, False),
    ({"webhook-id": "msg_other"}, False),
    ({"now": SPEC_TS + 301}, False),  # outside the 5-minute replay window
    ({"webhook-signature": "v1,bogus " + SPEC_SIGNATURE}, True),  # any listed signature may match
])
def test_verify_accepts_only_the_signed_request_in_its_time_window(change: dict, accepted: bool) -> None:
    secret = parse_secret(SPEC_SECRET)
    headers = signed_headers(secret, SPEC_ID, SPEC_TS, SPEC_BODY)
    headers.update({k: v for k, v in change.items() if k.startswith("webhook")})
    ok = verify(secret, headers, change.get("body", SPEC_BODY), now=change.get("now", SPEC_TS))
    assert ok is accepted


def test_secret_comes_from_the_file_before_the_environment(tmp_path: Path) -> None:
    f = tmp_path / "secret"
    f.write_text(SPEC_SECRET + "\n")
    from_file = load_secret(str(f), "HOOK_SECRET", env={"HOOK_SECRET": "other"})
    assert from_file.sign("a", 1, b"") == parse_secret(SPEC_SECRET).sign("a", 1, b"")
    from_env = load_secret(None, "HOOK_SECRET", env={"HOOK_SECRET": "raw-secret"})
    assert from_env.sign("a", 1, b"") == parse_secret("raw-secret").sign("a", 1, b"")


@pytest.mark.parametrize(("secret_file", "secret_env", "env", "message"), [
    ("/nonexistent/secret", None, {}, "secret_file /nonexistent/secret: no such file"),
    (None, "HOOK_SECRET", {}, "secret_env HOOK_SECRET: the environment variable is not set"),
    (None, "HOOK_SECRET", {"HOOK_SECRET": "whsec_!!!"}, "must continue with base64"),
])
def test_a_missing_or_bad_secret_names_where_it_was_looked_for(secret_file: str | None, secret_env: str | None,
                                                                env: dict, message: str) -> None:
    with pytest.raises(SecretError, match=message):
        load_secret(secret_file, secret_env, env=env)


def test_secrets_never_show_in_repr_or_errors() -> None:
    fresh = new_secret()
    assert fresh.startswith("whsec_") and len(parse_secret(fresh)._key) == 32
    assert fresh not in repr(parse_secret(fresh))
    with pytest.raises(SecretError) as err:
        load_secret(None, "HOOK_SECRET", env={"HOOK_SECRET": "whsec_not base64!"})
    assert "not base64" not in str(err.value)
