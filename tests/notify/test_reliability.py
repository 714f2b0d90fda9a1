"""Notifying when things go wrong around it: a receiver that never answers at stop, a full disk, a damaged
or empty outbox file, a receiver that keeps failing. Real SQLite, real HTTP on 127.0.0.1, a real tmpfs."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from gpuwatch.config import NotifyConfig
from gpuwatch.notify import Notifier, Outbox
from gpuwatch.notify import notifier as notifier_module
from gpuwatch.notify.salvage import open_outbox
from gpuwatch.notify.webhook_client import WebhookClient
from notify.disk import fill, small_tmpfs
from notify.receiver import Receiver, Script
from notify.test_delivery import make, queue, statuses
from notify.test_notifier import alert, fire, queued, resolve
from notify.test_notifier import receiver as receiver_config

# --- 1. stopping never waits for a receiver ----------------------------------------------------------------

@pytest.mark.serial  # bounds CPU share, wall time or RSS: measured alone, after the parallel part
def test_stop_abandons_an_attempt_in_flight_and_the_row_stays_pending_unchanged(tmp_path: Path,
                                                                               receiver: Receiver) -> None:
    receiver.script = Script(hang_s=60)  # accepts, never answers
    d = make(tmp_path, receiver, NotifyConfig(timeout=45.0, initial_backoff=1.0, max_backoff=5.0))
    queue(d, b'{"n":1}')

    async def run_then_stop() -> float:
        stop = asyncio.Event()
        task = asyncio.create_task(d.run(stop))
        while not receiver.hung:
            await asyncio.sleep(0.02)
        started = time.monotonic()
        stop.set()
        await task
        return time.monotonic() - started

    took = asyncio.run(run_then_stop())
    assert took < 1.0  # not notify.timeout (45 s)
    assert statuses(d) == {"msg_0": "pending"}
    assert d.outbox.conn.execute("SELECT attempts FROM outbox").fetchone()[0] == 0
    assert [r.webhook_id for r in receiver.hung] == ["msg_0"]


def test_the_last_flush_at_stop_is_bounded_by_its_own_timeout_whatever_the_receiver_does(
        tmp_path: Path, receiver: Receiver) -> None:
    receiver.script = Script(hang_s=60)
    d = make(tmp_path, receiver, NotifyConfig(timeout=45.0))
    queue(d, b'{"n":1}')
    started = time.monotonic()
    left = asyncio.run(d.flush(1.0))
    assert time.monotonic() - started < 3.0
    assert left == 1 and statuses(d) == {"msg_0": "pending"}


# --- 2. a full disk: every transition kept, health only back with a real write -----------------------------

def test_an_alert_that_fires_and_resolves_while_the_disk_is_full_is_notified_both_ways(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk") as disk:
        n = Notifier(Outbox(disk / "outbox.sqlite"), [receiver_config()], "http://x")
        n.handle([], [], 1.0)
        filler = fill(disk)
        firing, resolved = alert("GpuStarved", "firing", t=10.0), alert("GpuStarved", "resolved", t=20.0)
        for t, transitions, active in ((10.0, [fire(firing, 10.0)], [firing]), (20.0, [resolve(resolved, 20.0)], []),
                                       (21.0, [], []), (22.0, [], [])):
            n.handle(transitions, active, t)
        full_health = n.health_report()
        filler.unlink()
        n.handle([], [], 23.0)
        states = [(q["status"], [a["state"] for a in q["alerts"]]) for q in queued(n.outbox)]
    assert full_health["ok"] is False and full_health["unsaved_transitions"] == 2
    assert states == [("firing", ["firing"]), ("resolved", ["resolved"])]
    assert n.health_report()["ok"] is True and n.unsaved == 0


def test_after_failed_writes_an_evaluation_that_writes_nothing_does_not_count_as_healthy(tmp_path: Path) -> None:
    """An empty transaction commits on a full disk: only a probe that stores a row may end the failure."""
    with small_tmpfs(tmp_path / "disk") as disk:
        n = Notifier(Outbox(disk / "outbox.sqlite"), [receiver_config()], "http://x")
        n.handle([], [], 1.0)
        filler = fill(disk)
        firing = alert("GpuStarved", "firing", t=10.0)
        for t in range(10, 16):
            n.handle([fire(firing, float(t))] if t == 10 else [], [firing], float(t))
        unhealthy_while_full = [n.health.healthy]
        n._unsaved = []  # nothing left to store: only quiet evaluations now, on a disk that is still full
        for t in range(16, 20):
            n.handle([], [firing], float(t))
            unhealthy_while_full.append(n.health.healthy)
        filler.unlink()
        n.handle([], [firing], 30.0)
    assert unhealthy_while_full == [False] * 5
    assert n.health.healthy


def test_unsaved_transitions_are_bounded_and_the_dropped_ones_counted(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notifier_module, "MAX_UNSAVED", 3)
    outbox = Outbox(tmp_path / "outbox.sqlite")
    n = Notifier(outbox, [receiver_config()], "http://x")
    outbox.conn.execute("DROP TABLE alert_state")  # every write fails from here on
    for i in range(5):
        a = alert(f"A{i}", "firing", t=10.0 + i)
        n.handle([fire(a, 10.0 + i)], [a], 10.0 + i)
    assert n.unsaved == 3 and n.unsaved_dropped == 2
    assert n.health_report()["unsaved_dropped"] == 2


# --- 6. a damaged or empty outbox: pending rows salvaged with their ids ------------------------------------

def _outbox_with_pending(path: Path, n: int = 7, body: bytes = b'{"x":1}') -> list[str]:
    outbox = Outbox(path)
    with outbox.transaction() as conn:
        for i in range(n):
            outbox.enqueue(conn, f"msg_{i}", "ops", body, time.time())
        outbox.mark_delivered(1, time.time())  # one already sent: it must not come back
    outbox.close()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return [f"msg_{i}" for i in range(1, n)]


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(data)


def _root(path: Path, name: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT rootpage FROM sqlite_master WHERE name=?", (name,)).fetchone()[0])


#: variant -> (what happens to the file, how many of the 6 pending rows must come back). A torn table page
#: takes the rows stored in it: then the log must say that some could not be read.
DAMAGE = {
    "second-page-garbage": (lambda p: _overwrite(p, 4096, os.urandom(4096)), 6),
    "third-page-zeroed": (lambda p: _overwrite(p, 2 * 4096, b"\0" * 4096), 6),
    "header-garbage": (lambda p: _overwrite(p, 0, os.urandom(100)), 6),
    "outbox-index-page-garbage": (lambda p: _overwrite(p, (_root(p, "outbox_due") - 1) * 4096, os.urandom(4096)),
                                  6),
    "outbox-table-page-torn": (lambda p: _overwrite(p, (_root(p, "outbox") - 1) * 4096 + 2048, os.urandom(2048)),
                               0),
}


@pytest.mark.parametrize("variant", sorted(DAMAGE))
def test_a_damaged_outbox_is_salvaged_into_a_fresh_one_with_the_same_ids(
        tmp_path: Path, variant: str, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "outbox.sqlite"
    pending = _outbox_with_pending(db)
    damage, at_least = DAMAGE[variant]
    damage(db)
    with caplog.at_level(logging.ERROR):
        outbox = open_outbox(db)
    saved = [r[0] for r in outbox.conn.execute("SELECT webhook_id FROM outbox WHERE status='pending' ORDER BY id")]
    lines = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(lines) == 1 and "moved it to" in lines[0] and f"saved {len(saved)} pending" in lines[0]
    assert len(saved) >= at_least, f"{variant}: only {len(saved)} of {len(pending)} saved"
    assert set(saved) <= set(pending) and "msg_0" not in saved  # never an id twice, never a delivered one
    if len(saved) < len(pending):  # what could not be read is said
        assert "could not be read" in lines[0] or "may be lost" in lines[0]
    else:
        assert saved == pending
    assert len(list(tmp_path.glob("outbox.sqlite.corrupt-*"))) == 1


def test_pending_rows_in_overflow_pages_are_salvaged_around_a_damaged_one(tmp_path: Path) -> None:
    db = tmp_path / "outbox.sqlite"
    pending = _outbox_with_pending(db, body=b"x" * 9000)  # each body spans overflow pages
    _overwrite(db, 6 * 4096, os.urandom(4096))
    saved = [r[0] for r in open_outbox(db).conn.execute("SELECT webhook_id FROM outbox ORDER BY id")]
    assert len(saved) >= len(pending) - 1 and set(saved) <= set(pending)


def test_a_zero_length_outbox_is_said_in_the_log_not_replaced_silently(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "outbox.sqlite"
    _outbox_with_pending(db)
    os.truncate(db, 0)
    with caplog.at_level(logging.ERROR):
        open_outbox(db).close()
    assert [r for r in caplog.records if "zero-length" in r.getMessage()]


# --- 9. delivery health per receiver -----------------------------------------------------------------------

def test_healthz_delivery_reports_each_receiver_and_turns_unhealthy_after_the_configured_time(
        tmp_path: Path, receiver: Receiver) -> None:
    receiver.script = Script(fail_until=time.time() + 3600, fail_status=503)
    now = [time.time()]
    d = make(tmp_path, receiver, NotifyConfig(initial_backoff=0.1, max_backoff=1.0, unhealthy_after=60.0))
    d.clock = lambda: now[0]
    queue(d, b'{"n":1}', created=now[0])

    async def attempts(k: int) -> None:
        client = WebhookClient()
        for _ in range(k):
            await d.deliver_due(client, ignore_backoff=True)

    asyncio.run(attempts(3))
    early = d.health_report()
    now[0] += 61  # failing for longer than unhealthy_after
    late = d.health_report()
    receiver.script.fail_until = 0
    asyncio.run(attempts(1))
    recovered = d.health_report()
    ops = early["receivers"]["ops"]
    assert early["ok"] is True and ops["consecutive_failures"] == 3 and ops["last_success"] is None
    assert ops["oldest_pending_age_s"] is not None and "503" in ops["last_error"]
    assert late["ok"] is False and late["receivers"]["ops"]["ok"] is False
    assert recovered["ok"] is True and recovered["receivers"]["ops"]["consecutive_failures"] == 0
    assert recovered["receivers"]["ops"]["last_success"] == now[0]
    assert recovered["receivers"]["ops"]["oldest_pending_age_s"] is None
