"""Standard Webhooks signatures (https://www.standardwebhooks.com/).

Every request carries ``webhook-id`` (the same on every retry of one notification, so receivers can
de-duplicate), ``webhook-timestamp`` (Unix seconds of this attempt) and ``webhook-signature``:
``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``. Secrets look like ``whsec_<base64>``; any other
string is used as raw bytes. Secrets are never logged or put in error messages.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping

from gpuwatch.model import files
from gpuwatch.model.errors import InputError

PREFIX = "whsec_"
#: A secret is one line; a bigger file is the wrong file.
MAX_SECRET_BYTES = 64 * 1024


class SecretError(InputError):
    """A receiver whose secret cannot be read; the message names where it was looked for."""


class Secret:
    """Signing key bytes that do not show themselves in reprs, logs or tracebacks."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if not key:
            raise SecretError("the signing secret is empty")
        self._key = key

    def __repr__(self) -> str:
        return "Secret(***)"

    def sign(self, msg_id: str, timestamp: int, body: bytes) -> str:
        """The ``webhook-signature`` value for one attempt."""
        mac = hmac.new(self._key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
        return "v1," + base64.b64encode(mac).decode("ascii")


def parse_secret(text: str) -> Secret:
    """``whsec_<base64>`` -> its decoded bytes; anything else -> its UTF-8 bytes."""
    text = text.strip()
    if text.startswith(PREFIX):
        try:
            return Secret(base64.b64decode(text[len(PREFIX):], validate=True))
        except (binascii.Error, ValueError):
            raise SecretError("a secret starting with whsec_ must continue with base64") from None
    return Secret(text.encode("utf-8"))


def load_secret(secret_file: str | None, secret_env: str | None, env: Mapping[str, str] | None = None) -> Secret:
    """The receiver's secret from its file (first) or environment variable."""
    env = os.environ if env is None else env
    if secret_file:
        try:
            return parse_secret(files.read_text(secret_file, MAX_SECRET_BYTES))
        except FileNotFoundError:
            raise SecretError(f"secret_file {secret_file}: no such file") from None
        except OSError as exc:
            raise SecretError(f"secret_file {secret_file}: cannot read it ({files.describe(exc)})") from None
        except UnicodeDecodeError:
            raise SecretError(f"secret_file {secret_file}: not UTF-8 text") from None
        except SecretError as exc:
            raise SecretError(f"secret_file {secret_file}: {exc}") from None
    if secret_env:
        if not env.get(secret_env):
            raise SecretError(f"secret_env {secret_env}: the environment variable is not set")
        try:
            return parse_secret(env[secret_env])
        except SecretError as exc:
            raise SecretError(f"secret_env {secret_env}: {exc}") from None
    raise SecretError("no secret_file or secret_env")


def new_secret() -> str:
    """A fresh ``whsec_`` secret (32 random bytes)."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def signed_headers(secret: Secret, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": secret.sign(msg_id, timestamp, body), "content-type": "application/json"}


def verify(secret: Secret, headers: Mapping[str, str], body: bytes, now: int, tolerance_s: int = 300) -> bool:
    """What a receiver does: check the timestamp window and any ``v1`` signature (constant-time)."""
    try:
        msg_id, ts = headers["webhook-id"], int(headers["webhook-timestamp"])
    except (KeyError, ValueError):
        return False
    if abs(now - ts) > tolerance_s:
        return False
    expected = secret.sign(msg_id, ts, body)
    return any(hmac.compare_digest(expected, sig) for sig in headers.get("webhook-signature", "").split())
