"""What the daemon does on every snapshot or scrape (evaluate the alerts, render /metrics, write the roll-ups)
must say so on /healthz, and stop the watchdog, when it fails; a full disk must not lose roll-up blocks."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from notify.disk import fill, small_tmpfs

from daemon.conftest import RunningDaemon
from daemon.incident import write_recording
from gpuwatch.config import Config, DaemonConfig
from gpuwatch.efficiency.offline import account_recording
from gpuwatch.efficiency.store import FILE
from gpuwatch.model.causes import STATES
from gpuwatch.model.snapshot import Snapshot


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


class Broken(Exception):
    pass


def test_a_failing_evaluation_and_render_make_the_daemon_unhealthy_until_they_work(
        base_config: Config, tmp_path: Path) -> None:
    d = RunningDaemon(base_config, write_recording(tmp_path / "r.ndjson.gz", n=3_000), speed=20.0)
    engine = d.daemon.engine
    evaluate = engine.evaluate

    def broken_evaluate(snap: Snapshot) -> list[object]:
        raise Broken("a rule that cannot be evaluated")

    class BrokenCollector:
        def collect(self) -> Iterator[object]:
            raise Broken("a series that cannot be rendered")

    try:
        d.wait_evaluated(3)
        assert requests.get(d.url + "/healthz", timeout=5).status_code == 200
        assert d.daemon._watchdog_ok(60.0)
        engine.evaluate = broken_evaluate  # type: ignore[method-assign]
        wait_for(lambda: d.daemon.pipeline.evaluation_error, 10, "no evaluation failed")
        sick = requests.get(d.url + "/healthz", timeout=5)
        watchdog_while_sick = d.daemon._watchdog_ok(60.0)
        engine.evaluate = evaluate  # type: ignore[method-assign]
        wait_for(lambda: d.daemon.pipeline.evaluation_error is None, 10, "evaluation did not recover")
        mended = requests.get(d.url + "/healthz", timeout=5)

        broken = BrokenCollector()
        d.daemon.exporter.registry.register(broken)  # type: ignore[arg-type]
        scrape = requests.get(d.url + "/metrics", timeout=5)
        unrendered = requests.get(d.url + "/healthz", timeout=5)
        watchdog_unrendered = d.daemon._watchdog_ok(60.0)
        d.daemon.exporter.registry.unregister(broken)  # type: ignore[arg-type]
        rescrape = requests.get(d.url + "/metrics", timeout=5)
        rendered = requests.get(d.url + "/healthz", timeout=5)
    finally:
        d.stop()
    assert sick.status_code == 503
    assert "a rule that cannot be evaluated" in sick.json()["failing"]["alert_evaluation"]
    assert not watchdog_while_sick
    assert mended.status_code == 200 and "failing" not in mended.json()
    assert scrape.status_code == 500 and "a series that cannot be rendered" in scrape.text
    assert unrendered.status_code == 503 and "metrics_render" in unrendered.json()["failing"]
    assert not watchdog_unrendered
    assert rescrape.status_code == 200 and rendered.status_code == 200


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "small-disk", size="4m") as mount:
        yield mount


def gpu_seconds(rows: list[tuple[object, ...]]) -> dict[tuple[object, object], tuple[float, ...]]:
    return {(r[0], r[1]): tuple(round(float(v), 6) for v in r[2:]) for r in rows}  # type: ignore[arg-type]


def test_rollup_blocks_written_during_a_full_disk_are_kept_in_order_and_written_when_space_returns(
        tmp_path: Path, small_disk: Path) -> None:
    recording = write_recording(tmp_path / "r.ndjson.gz", n=400)
    config = Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(small_disk)))
    d = RunningDaemon(config, recording, speed=20.0)
    try:
        accounting = d.daemon.efficiency
        assert accounting is not None
        wait_for(lambda: accounting.commits >= 1, 20, "no roll-up block was written")
        filler = fill(small_disk)
        wait_for(lambda: accounting.unsaved >= 3, 20, "the full disk never kept a block back")
        health = requests.get(d.url + "/healthz", timeout=5)
        watchdog = d.daemon._watchdog_ok(60.0)
        filler.unlink()  # space comes back
        wait_for(lambda: accounting.unsaved == 0, 20, "the kept blocks were never written")
        healthy_again = requests.get(d.url + "/healthz", timeout=5)
        wait_for(lambda: d.daemon.sampler.finished.is_set(), 60, "the replay did not end")
    finally:
        d.stop()
    assert health.status_code == 503
    body = health.json()
    assert body["efficiency_unsaved"] >= 3 and "efficiency_rollups" in body["failing"]
    assert "full" in body["failing"]["efficiency_rollups"]
    assert not watchdog
    assert healthy_again.status_code == 200, healthy_again.text
    with sqlite3.connect(small_disk / FILE) as db:
        written = gpu_seconds(db.execute("SELECT * FROM gpu_seconds").fetchall())
    expected = gpu_seconds([(*r.key, *r.states) for r in account_recording(recording).rollup.seconds])
    assert written == expected  # every block, once: as if the disk had never been full
    assert len(STATES) == len(next(iter(expected.values())))
