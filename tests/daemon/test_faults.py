"""Faults against the real daemon (a child process) and a real receiver on 127.0.0.1: a receiver that hangs at
stop, a full disk (a small tmpfs), a read-only state directory, a damaged and an empty outbox, a receiver
that is down and then up, sampling that fails before the first snapshot. At each step nothing queued is
lost and /healthz says what is true."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from notify.disk import fill, small_tmpfs
from notify.receiver import Receiver, Script

from daemon.incident import write_config, write_recording
from daemon.process import DaemonProcess


def rows(db: Path) -> list[tuple[str, str]]:
    """(webhook_id, status) of every outbox row, read-only (the daemon may be running)."""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            return conn.execute("SELECT webhook_id, status FROM outbox ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def health(d: DaemonProcess) -> tuple[int, dict]:  # type: ignore[type-arg]
    r = d.healthz()
    return r.status_code, r.json()


@pytest.mark.slow
def test_sigterm_with_a_receiver_that_never_answers_stops_in_seconds_and_the_row_goes_out_after_restart(
        tmp_path: Path, receiver: Receiver) -> None:
    receiver.script = Script(hang_s=120)  # accepts every request and answers nothing
    state = tmp_path / "state"
    config = write_config(tmp_path, state, receiver, notify='timeout = "45s"')
    recording = write_recording(tmp_path / "r.ndjson.gz", n=120, recovers=False)
    first = DaemonProcess(config, recording, tmp_path / "first.log", extra=("--speed", "20"))
    try:
        wait_until(lambda: receiver.hung, 30, "a notification in flight")
        in_flight = receiver.hung[0].webhook_id
        started = time.monotonic()
        assert first.stop(timeout=15) == 0
        took = time.monotonic() - started
    finally:
        first.kill()
    assert took < 10, f"stop took {took:.1f} s"
    assert (in_flight, "pending") in rows(state / "outbox.sqlite")

    receiver.script = Script()  # the receiver answers again
    second = DaemonProcess(config, recording, tmp_path / "second.log", extra=("--speed", "20"))
    try:
        wait_until(lambda: in_flight in {r.webhook_id for r in receiver.delivered()}, 30, "the same id delivered")
        wait_until(lambda: all(s == "delivered" for _, s in rows(state / "outbox.sqlite")), 30, "nothing pending")
    finally:
        assert second.stop() == 0
    assert "Traceback" not in first.log.read_text() + second.log.read_text()


@pytest.mark.slow
def test_a_full_disk_keeps_every_transition_and_healthz_stays_503_until_writes_store_again(
        tmp_path: Path, receiver: Receiver) -> None:
    with small_tmpfs(tmp_path / "disk") as disk:
        config = write_config(tmp_path, disk, receiver)
        # Starved from tick 50 to 150 of 200: the alerts fire and resolve while the disk is full.
        recording = write_recording(tmp_path / "r.ndjson.gz", n=200, recovers=True)
        d = DaemonProcess(config, recording, tmp_path / "daemon.log", extra=("--speed", "10"))
        try:
            d.wait_healthy()
            filler = fill(disk)
            wait_until(lambda: health(d)[1]["ticks"] >= 170, 60, "the alert to fire and resolve")
            full_status, full = health(d)
            time.sleep(1.0)  # quiet evaluations on a disk that is still full
            still_full_status, _ = health(d)
            assert receiver.requests == [] and rows(disk / "outbox.sqlite") == []
            filler.unlink()
            wait_until(lambda: health(d)[0] == 200, 20, "healthy once the disk takes writes")
            delivered = receiver.wait_for(4, timeout=20)
            _, after = health(d)
        finally:
            assert d.stop() == 0
    assert full_status == 503 and still_full_status == 503
    assert full["notifier"]["ok"] is False and "full" in full["notifier"]["last_error"]
    assert full["notifier"]["unsaved_transitions"] >= 4 and full["notifier"]["unsaved_dropped"] == 0
    states = sorted((a["labels"]["alertname"], body["status"]) for r in delivered for body in [r.json()]
                    for a in body["alerts"])
    assert states == [("GpuStarved", "firing"), ("GpuStarved", "resolved"),
                      ("ThreadCpuBound", "firing"), ("ThreadCpuBound", "resolved")]
    assert after["notifier"]["unsaved_transitions"] == 0


@pytest.mark.slow
def test_a_read_only_state_dir_is_one_clear_line_and_no_pending_notification_is_lost(
        tmp_path: Path, receiver: Receiver) -> None:
    receiver.script = Script(fail_until=time.time() + 3600)
    with small_tmpfs(tmp_path / "disk", "8m") as disk:
        config = write_config(tmp_path, disk, receiver)
        recording = write_recording(tmp_path / "r.ndjson.gz", n=120, recovers=False)
        first = DaemonProcess(config, recording, tmp_path / "first.log", extra=("--speed", "20"))
        try:
            wait_until(lambda: len(receiver.requests) >= 2, 30, "notifications refused")
        finally:
            assert first.stop() == 0
        pending = [w for w, s in rows(disk / "outbox.sqlite") if s == "pending"]
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        ro = subprocess.run([sys.executable, "-m", "gpuwatch", "daemon", "--config", str(config), "--replay",
                             str(recording)], capture_output=True, text=True, timeout=60)
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
        receiver.script = Script()
        second = DaemonProcess(config, recording, tmp_path / "second.log", extra=("--speed", "20"))
        try:
            wait_until(lambda: set(pending) <= {r.webhook_id for r in receiver.delivered()}, 30, "pending delivered")
        finally:
            assert second.stop() == 0
    assert pending
    lines = [line for line in ro.stderr.splitlines() if line.strip()]
    assert ro.returncode != 0 and "Traceback" not in ro.stderr
    assert len(lines) == 1 and str(disk) in lines[0] and "read-only" in lines[0].lower(), ro.stderr


def damage_second_page(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with db.open("r+b") as f:
        f.seek(4096)
        f.write(os.urandom(4096))


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["damaged", "zero-length"])
def test_pending_notifications_survive_a_damaged_outbox_with_their_ids_and_an_empty_one_is_logged(
        tmp_path: Path, receiver: Receiver, fault: str) -> None:
    receiver.script = Script(fail_until=time.time() + 3600)
    state = tmp_path / "state"
    config = write_config(tmp_path, state, receiver)
    recording = write_recording(tmp_path / "r.ndjson.gz", n=120, recovers=False)
    first = DaemonProcess(config, recording, tmp_path / "first.log", extra=("--speed", "20"))
    try:
        wait_until(lambda: len(receiver.requests) >= 2, 30, "notifications refused")
    finally:
        assert first.stop() == 0
    db = state / "outbox.sqlite"
    pending = [w for w, s in rows(db) if s == "pending"]
    if fault == "damaged":
        damage_second_page(db)
    else:
        os.truncate(db, 0)
        for suffix in ("-wal", "-shm"):
            db.with_name(db.name + suffix).unlink(missing_ok=True)
    receiver.script = Script()
    second = DaemonProcess(config, recording, tmp_path / "second.log", extra=("--speed", "0"))
    try:
        second.wait_healthy()
        if fault == "damaged":
            wait_until(lambda: set(pending) <= {r.webhook_id for r in receiver.delivered()}, 30, "same ids")
    finally:
        assert second.stop() == 0
    log = second.log.read_text()
    assert "Traceback" not in log
    if fault == "damaged":
        assert pending and f"saved {len(pending)} pending notification(s)" in log
    else:
        assert "zero-length" in log


@pytest.mark.slow
def test_a_receiver_down_then_up_shows_in_healthz_delivery_and_nothing_is_lost(tmp_path: Path,
                                                                              receiver: Receiver) -> None:
    receiver.script = Script(fail_until=time.time() + 3600, fail_status=503)
    state = tmp_path / "state"
    config = write_config(tmp_path, state, receiver, notify='unhealthy_after = "10s"')
    recording = write_recording(tmp_path / "r.ndjson.gz", n=120, recovers=False)
    d = DaemonProcess(config, recording, tmp_path / "daemon.log", extra=("--speed", "20", "--loop"))
    try:
        wait_until(lambda: len(receiver.requests) >= 2, 30, "failed attempts")
        early_status, early = health(d)
        wait_until(lambda: health(d)[0] == 503, 30, "unhealthy after 10 s of failures")
        _, down = health(d)
        receiver.script.fail_until = 0
        wait_until(lambda: health(d)[0] == 200, 30, "healthy once the receiver takes them")
        _, up = health(d)
        seen: list[list[tuple[str, str]]] = []  # one read of the outbox in which every row is delivered

        def all_delivered() -> bool:
            seen.append(rows(state / "outbox.sqlite"))
            return bool(seen[-1]) and all(status == "delivered" for _, status in seen[-1])

        wait_until(all_delivered, 30, "every queued notification delivered")
        queued = {w for w, _ in seen[-1]}
        delivered = {r.webhook_id for r in receiver.delivered()}
    finally:
        assert d.stop() == 0
    assert early_status == 200 and early["delivery"]["receivers"]["ops"]["consecutive_failures"] >= 1
    assert early["delivery"]["receivers"]["ops"]["last_success"] is None
    assert down["delivery"]["ok"] is False and down["delivery"]["receivers"]["ops"]["oldest_pending_age_s"] > 10
    ops = up["delivery"]["receivers"]["ops"]
    assert ops["consecutive_failures"] == 0 and ops["last_success"] is not None
    assert queued and queued <= delivered


@pytest.mark.slow
def test_the_watchdog_is_not_pinged_when_sampling_fails_before_the_first_snapshot(tmp_path: Path) -> None:
    good = write_recording(tmp_path / "good.ndjson.gz", n=5)
    with gzip.open(good, "rt") as f:
        header = f.readline()
    bad = tmp_path / "bad.ndjson.gz"
    with gzip.open(bad, "wt") as f:  # the header is fine; the first snapshot is not
        f.write(header + json.dumps({"time": "noon", "host": {}}) + "\n")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    sock.settimeout(0.2)
    env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify.sock"), "WATCHDOG_USEC": "400000"}
    env.pop("WATCHDOG_PID", None)
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--replay", str(bad), "--listen",
                             "127.0.0.1:0", "--state-dir", str(tmp_path / "state")], env=env,
                            stderr=subprocess.PIPE, text=True)
    got: list[str] = []
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                got.append(sock.recv(4096).decode())
            except TimeoutError:
                pass
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        proc.kill()
        sock.close()
        stderr = proc.communicate()[1]
    assert "sampling stopped" in stderr and "not pinging the watchdog" in stderr
    assert sum("WATCHDOG=1" in m for m in got) <= 1, got  # at most the one sent before the first tick failed
    assert "Traceback" not in stderr
