"""Delivery to a real HTTP receiver: retries with the same webhook-id, Retry-After, dead letters."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gpuwatch.config import NotifyConfig, ReceiverConfig
from gpuwatch.notify import Deliverer, Outbox, Target, parse_secret, verify
from gpuwatch.notify.delivery import backoff_s, retry_after_s
from gpuwatch.notify.webhook_client import WebhookClient
from notify.receiver import Receiver, Script

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
FAST = NotifyConfig(initial_backoff=0.05, max_backoff=0.2, timeout=2.0, max_age=30.0)


def make(tmp_path: Path, receiver: Receiver, cfg: NotifyConfig = FAST) -> Deliverer:
    rc = ReceiverConfig(name="ops", kind="generic", url=receiver.url, secret_env="X")
    return Deliverer(Outbox(tmp_path / "outbox.sqlite"), {"ops": Target(rc, parse_secret(SECRET))}, cfg)


def queue(d: Deliverer, *bodies: bytes, created: float | None = None) -> None:
    with d.outbox.transaction() as conn:
        for i, body in enumerate(bodies):
            d.outbox.enqueue(conn, f"msg_{i}", "ops", body, time.time() if created is None else created)


async def drain(d: Deliverer, seconds: float) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(d.run(stop))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(s == "pending" for (_, s) in d.outbox.counts()):
        await asyncio.sleep(0.02)
    stop.set()
    await task


def statuses(d: Deliverer) -> dict[str, str]:
    return dict(d.outbox.conn.execute("SELECT webhook_id, status FROM outbox").fetchall())


def test_a_failing_receiver_gets_retries_with_the_same_id_until_it_accepts(tmp_path: Path,
                                                                           receiver: Receiver) -> None:
    receiver.script = Script(fail_first=3, fail_status=500)
    d = make(tmp_path, receiver)
    queue(d, b'{"n":1}')
    asyncio.run(drain(d, 10))
    assert [r.answered for r in receiver.requests] == [500, 500, 500, 200]
    assert {r.webhook_id for r in receiver.requests} == {"msg_0"}
    assert len({r.headers["webhook-signature"] for r in receiver.requests}) >= 1
    last = receiver.requests[-1]
    assert verify(parse_secret(SECRET), last.headers, last.body, now=int(time.time()))
    assert statuses(d) == {"msg_0": "delivered"}


def test_retry_after_is_honoured(tmp_path: Path, receiver: Receiver) -> None:
    receiver.script = Script(fail_first=1, fail_status=503, retry_after="1")
    d = make(tmp_path, receiver, NotifyConfig(initial_backoff=0.01, max_backoff=5.0, timeout=2.0))
    queue(d, b"{}")
    asyncio.run(drain(d, 10))
    first, second = receiver.requests
    assert second.at - first.at >= 0.95  # not the 10 ms backoff: the receiver asked for 1 s


def test_one_receivers_notifications_arrive_in_the_order_queued(tmp_path: Path, receiver: Receiver) -> None:
    receiver.script = Script(fail_first=2)
    d = make(tmp_path, receiver)
    queue(d, b'{"n":0}', b'{"n":1}', b'{"n":2}')
    asyncio.run(drain(d, 10))
    assert [r.json()["n"] for r in receiver.delivered()] == [0, 1, 2]


@pytest.mark.parametrize(("status", "final"), [(400, "dead"), (404, "dead"), (429, "delivered"),
                                               (408, "delivered"), (502, "delivered")])
def test_request_errors_are_dead_lettered_and_transient_ones_retried(tmp_path: Path, receiver: Receiver,
                                                                    status: int, final: str) -> None:
    receiver.script = Script(fail_first=1, fail_status=status)
    d = make(tmp_path, receiver)
    queue(d, b"{}")
    asyncio.run(drain(d, 10))
    assert statuses(d) == {"msg_0": final}


def test_a_notification_older_than_max_age_is_dead_lettered(tmp_path: Path, receiver: Receiver) -> None:
    d = make(tmp_path, receiver)
    queue(d, b"{}", created=time.time() - 31)
    asyncio.run(drain(d, 5))
    assert statuses(d) == {"msg_0": "dead"} and receiver.requests == []


def test_an_unreachable_receiver_is_retried_not_crashed(tmp_path: Path) -> None:
    rc = ReceiverConfig(name="ops", kind="generic", url="http://127.0.0.1:9/nothing", secret_env="X")
    d = Deliverer(Outbox(tmp_path / "o.sqlite"), {"ops": Target(rc, parse_secret(SECRET))}, FAST)
    queue(d, b"{}")

    async def go() -> None:
        await d.deliver_due(WebhookClient())

    asyncio.run(go())
    attempts, error, status = d.outbox.conn.execute("SELECT attempts, last_error, status FROM outbox").fetchone()
    assert (attempts, status) == (1, "pending") and "Connect" in error


@pytest.mark.parametrize(("attempts", "low", "high"), [(0, 0.025, 0.05), (1, 0.05, 0.1), (2, 0.1, 0.2),
                                                      (3, 0.1, 0.2), (40, 0.1, 0.2)])
def test_backoff_doubles_with_jitter_and_is_capped(attempts: int, low: float, high: float) -> None:
    assert backoff_s(attempts, FAST, rand=lambda: 0.0) == pytest.approx(low)
    assert backoff_s(attempts, FAST, rand=lambda: 1.0) == pytest.approx(high)


@pytest.mark.parametrize(("header", "expected"), [("7", 7.0), (None, None), ("soon", None),
                                                  ("Thu, 01 Jan 1970 00:01:40 GMT", 40.0)])
def test_retry_after_reads_seconds_and_http_dates(header: str | None, expected: float | None) -> None:
    assert retry_after_s(header, now=60.0) == expected


def test_flush_at_shutdown_tries_pending_rows_once_more_without_waiting(tmp_path: Path,
                                                                        receiver: Receiver) -> None:
    d = make(tmp_path, receiver, NotifyConfig(initial_backoff=60, max_backoff=60))
    queue(d, b'{"n":0}', b'{"n":1}')
    d.outbox.conn.execute("UPDATE outbox SET next_attempt = ?", (time.time() + 3600,))  # in backoff
    left = asyncio.run(d.flush(5.0))
    assert left == 0 and len(receiver.delivered()) == 2


def test_finished_rows_are_kept_a_week_then_pruned(tmp_path: Path, receiver: Receiver) -> None:
    d = make(tmp_path, receiver)
    queue(d, b'{"n":0}', b'{"n":1}')
    asyncio.run(drain(d, 5))
    d.outbox.conn.execute("UPDATE outbox SET finished = ? WHERE webhook_id = 'msg_0'", (time.time() - 8 * 86400,))
    d.outbox.prune()
    assert statuses(d) == {"msg_1": "delivered"}


def test_rows_of_a_receiver_removed_from_the_config_are_dead_lettered_after_max_age(tmp_path: Path,
                                                                                     receiver: Receiver) -> None:
    d = make(tmp_path, receiver)
    with d.outbox.transaction() as conn:
        d.outbox.enqueue(conn, "msg_old", "gone", b"{}", time.time() - 60)  # older than max_age 30 s
        d.outbox.enqueue(conn, "msg_new", "gone", b"{}", time.time())
    asyncio.run(drain(d, 0.5))
    assert statuses(d) == {"msg_old": "dead", "msg_new": "pending"}  # the young one waits for a reload
    assert receiver.requests == []


def test_a_redirect_is_not_followed_with_the_signed_headers(tmp_path: Path, receiver: Receiver) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(307)
            self.send_header("Location", receiver.url)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        rc = ReceiverConfig(name="ops", kind="generic", url=f"http://127.0.0.1:{server.server_address[1]}/",
                            secret_env="X")
        d = Deliverer(Outbox(tmp_path / "outbox.sqlite"), {"ops": Target(rc, parse_secret(SECRET))}, FAST)
        queue(d, b'{"n":1}')
        asyncio.run(drain(d, 2))
    finally:
        server.shutdown()
        server.server_close()
    assert receiver.requests == []
    row = d.outbox.conn.execute("SELECT status, last_error FROM outbox").fetchone()
    assert row[0] == "dead" and "redirect" in row[1]


def test_the_outbox_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    import os
    import stat

    old = tmp_path / "old.sqlite"
    old.touch(mode=0o644)
    os.chmod(old, 0o644)
    for path in (tmp_path / "new.sqlite", old):
        Outbox(path).close()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(("kind", "path"), [("slack", "/hook"), ("alertmanager_api", "/am/api/v2/alerts")])
def test_receivers_that_check_no_signature_get_none_and_alertmanager_gets_its_api_path(
        tmp_path: Path, receiver: Receiver, kind: str, path: str) -> None:
    url = receiver.url.replace("/hook", "/am/") if kind == "alertmanager_api" else receiver.url
    rc = ReceiverConfig(name="ops", kind=kind, url=url)
    d = Deliverer(Outbox(tmp_path / "outbox.sqlite"), {"ops": Target(rc, None)}, FAST)
    queue(d, b'[{"labels":{"alertname":"A"}}]')
    asyncio.run(drain(d, 10))
    (got,) = receiver.requests
    assert got.path == path and got.headers["content-type"] == "application/json"
    assert "webhook-signature" not in got.headers and got.webhook_id == "msg_0"
    assert statuses(d) == {"msg_0": "delivered"}


def test_proxies_from_the_environment_are_not_used_and_the_client_says_who_it_is(
        tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there: a proxied POST would fail
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    d = make(tmp_path, receiver)
    queue(d, b'{"n":1}')
    asyncio.run(drain(d, 10))
    assert statuses(d) == {"msg_0": "delivered"}
    assert receiver.requests[0].headers["user-agent"] == "gpuwatch"
