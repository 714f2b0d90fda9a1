"""The outbox under real faults: a full disk during transitions (a small tmpfs), a damaged file at start.
No notification may be lost for good, and the daemon must say when notifying is failing."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from notify.disk import fill, small_tmpfs
from notify.receiver import Receiver

from daemon.conftest import RunningDaemon
from daemon.incident import write_recording, write_rules
from daemon.process import DaemonProcess
from gpuwatch.config import AlertsConfig, Config, DaemonConfig, ReceiverConfig
from gpuwatch.notify import new_secret


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs: a real filesystem that runs out of space (needs root; skipped elsewhere)."""
    with small_tmpfs(tmp_path / "small-disk") as mount:
        yield mount


def config_with_receiver(tmp_path: Path, state: Path, receiver: Receiver) -> Config:
    secret = tmp_path / "secret"
    secret.write_text(new_secret())
    return Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(state)),
                  alerts=AlertsConfig(rule_paths=(str(write_rules(tmp_path / "rules.yml")),)),
                  receivers=(ReceiverConfig(name="ops", kind="generic", url=receiver.url,
                                            secret_file=str(secret)),))


def test_transitions_during_a_full_disk_are_kept_and_notified_once_space_returns(
        tmp_path: Path, small_disk: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture) -> None:
    recording = write_recording(tmp_path / "r.ndjson.gz", n=200, recovers=False)  # starved from tick 50
    d = RunningDaemon(config_with_receiver(tmp_path, small_disk, receiver), recording, speed=10.0)
    try:
        filler = fill(small_disk)  # full before the alert fires (tick 60, six seconds in)
        deadline = time.monotonic() + 20
        while d.daemon.notify.health.consecutive < 5:
            assert time.monotonic() < deadline, "the full disk never failed a write"
            time.sleep(0.05)
        assert any(a.state == "firing" for a in d.daemon.pipeline.alerts)
        health = requests.get(d.url + "/healthz", timeout=5)
        metrics = requests.get(d.url + "/metrics", timeout=5).text
        assert receiver.requests == []
        filler.unlink()  # space comes back
        delivered = receiver.wait_for(1, timeout=15)
        healthy_again = requests.get(d.url + "/healthz", timeout=5).status_code
    finally:
        d.stop()
    assert health.status_code == 503
    assert health.json()["notifier"]["ok"] is False and "full" in health.json()["notifier"]["last_error"]
    failures = next(line for line in metrics.splitlines() if line.startswith("gpuwatch_outbox_write_failures"))
    assert float(failures.split()[-1]) >= 5
    assert [a["state"] for a in delivered[0].json()["alerts"]] == ["firing"] * len(delivered[0].json()["alerts"])
    assert healthy_again == 200
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and "outbox" in r.getMessage()]
    assert len(errors) == 1 and not errors[0].exc_info  # one line for a failure that repeated many times


def damage(db: Path) -> None:
    """Overwrite the second page (a table's root) with garbage, as a torn write or a bad sector would."""
    with sqlite3.connect(db) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with db.open("r+b") as f:
        f.seek(page)
        f.write(os.urandom(page))


def test_a_damaged_outbox_is_moved_aside_at_start_and_notifying_goes_on(tmp_path: Path,
                                                                       receiver: Receiver) -> None:
    state = tmp_path / "state"
    secret = tmp_path / "secret"
    secret.write_text(new_secret())
    config = tmp_path / "config.toml"
    config.write_text(f"""\
[alerts]
rule_paths = ["{write_rules(tmp_path / 'rules.yml')}"]
[daemon]
listen = "127.0.0.1:0"
state_dir = "{state}"
[[receivers]]
name = "ops"
kind = "generic"
url = "{receiver.url}"
secret_file = "{secret}"
""")
    recording = write_recording(tmp_path / "r.ndjson.gz", n=120, recovers=False)
    first = DaemonProcess(config, recording, tmp_path / "first.log", extra=("--speed", "0"))
    receiver.wait_for(1)
    assert first.stop() == 0
    db = state / "outbox.sqlite"
    damage(db)
    second = DaemonProcess(config, recording, tmp_path / "second.log", extra=("--speed", "20"))
    try:
        receiver.wait_for(2)
        health = second.healthz()
    finally:
        assert second.stop() == 0
    log = second.log.read_text()
    assert health.status_code == 200 and health.json()["notifier"]["failures"] == 0
    assert "Traceback" not in log
    assert [line for line in log.splitlines() if "damaged" in line and "moved it to" in line]
    assert len(list(state.glob("outbox.sqlite.corrupt-*"))) == 1
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


def test_notifier_failures_at_run_time_make_the_daemon_unhealthy(tmp_path: Path, receiver: Receiver) -> None:
    """The file damaged under a running daemon: every evaluation fails, /healthz turns 503, one log line."""
    recording = write_recording(tmp_path / "r.ndjson.gz", n=200, recovers=False)
    config = config_with_receiver(tmp_path, tmp_path / "state", receiver)
    d = RunningDaemon(config, recording, speed=10.0)
    try:
        d.daemon.outbox.conn.execute("DROP TABLE alert_state")  # what a lost page looks like to queries
        deadline = time.monotonic() + 20
        while d.daemon.notify.health.consecutive < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        health = requests.get(d.url + "/healthz", timeout=5)
    finally:
        d.stop()
    assert health.status_code == 503
    assert "no such table" in json.dumps(health.json()["notifier"])
