"""At-least-once delivery for real: a receiver that fails for a while, the daemon killed with SIGKILL
mid-way and started again. Every queued notification arrives, retries keep their webhook-id, none is lost."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from notify.receiver import Receiver, Script

from daemon.incident import write_config, write_recording
from gpuwatch.notify import parse_secret, verify


def outbox_rows(db: Path) -> list[tuple[str, str, bytes]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT webhook_id, status, body FROM outbox ORDER BY id").fetchall()
    except sqlite3.OperationalError:  # the daemon is creating the file right now
        return []


def start(config: Path, recording: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--config", str(config), "--replay",
                             str(recording), "--speed", "20"], stderr=log.open("ab"), stdout=subprocess.DEVNULL)


def wait_until(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_kill_9_and_restart_lose_no_notification(tmp_path: Path, receiver: Receiver) -> None:
    config = write_config(tmp_path, tmp_path / "state", receiver)
    secret = (tmp_path / "secret").read_text()
    recording = write_recording(tmp_path / "incident.ndjson.gz", n=120)  # starved from tick 30 to 90
    db, log = tmp_path / "state" / "outbox.sqlite", tmp_path / "daemon.log"
    receiver.script = Script(fail_until=time.time() + 3600, fail_status=503, retry_after="1")

    first = start(config, recording, log)
    try:  # the firing notifications are queued and being refused: kill it there, no chance to flush
        wait_until(lambda: len(outbox_rows(db)) >= 2 and len(receiver.requests) >= 2, 30, "firing notifications")
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
    finally:
        first.kill()
    before_kill = {r.webhook_id for r in receiver.requests}
    assert receiver.delivered() == [] and before_kill

    receiver.script.fail_until = time.time() + 2  # the receiver recovers two seconds into the restart
    second = start(config, recording, log)
    try:
        wait_until(lambda: (rows := outbox_rows(db)) and len(rows) >= 4 and all(s == "delivered" for _, s, _ in rows),
                   45, "every notification delivered")
        second.send_signal(signal.SIGTERM)
        assert second.wait(20) == 0
    finally:
        second.kill()

    rows = outbox_rows(db)
    delivered = receiver.delivered()
    assert {i for i, _, _ in rows} == {r.webhook_id for r in delivered}  # every queued one arrived
    assert before_kill <= {r.webhook_id for r in delivered}  # the retries after the restart kept their ids
    bodies = {i: b for i, _, b in rows}
    for r in receiver.requests:  # every attempt of one notification is the same request, correctly signed
        assert r.body == bodies[r.webhook_id]
        assert verify(parse_secret(secret), r.headers, r.body, now=int(r.at))
    seen = sorted((a["name"], a["state"]) for r in delivered for a in r.json()["alerts"])
    assert seen == [("GpuStarved", "firing"), ("GpuStarved", "resolved"),
                    ("ThreadCpuBound", "firing"), ("ThreadCpuBound", "resolved")]
    assert secret not in log.read_text() and "Traceback" not in log.read_text()
