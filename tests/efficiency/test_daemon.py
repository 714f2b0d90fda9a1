"""The daemon's accounting, as a real process replaying recordings with known causes: its counters and its
hourly roll-ups come to the recording's GPU-seconds to the second, the lost seconds land on the recorded
cause, and neither a restart nor a kill -9 loses or counts anything twice."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from daemon.process import DaemonProcess
from daemon.test_prometheus import free_port
from prometheus_client.parser import text_string_to_metric_families

from efficiency.expected import FAULTS, expected_cause, expected_seconds
from gpuwatch.data import bundled_recording
from gpuwatch.model.causes import STATES

pytestmark = pytest.mark.slow


def start(tmp_path: Path, recording: Path, speed: str = "0", name: str = "gw") -> DaemonProcess:
    config = tmp_path / "gpuwatch.toml"
    config.write_text(f'[daemon]\nlisten = "127.0.0.1:{free_port()}"\nstate_dir = "{tmp_path / "state"}"\n')
    return DaemonProcess(config, recording, tmp_path / f"{name}.log", extra=("--speed", speed))


def rollup(url: str) -> dict[str, Any]:
    resp = requests.get(url + "/api/v1/efficiency", params={"window": 7 * 86400}, timeout=5)
    if resp.status_code == 503:
        return {"seconds": [], "lost": []}
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def totals(body: dict[str, Any]) -> dict[str, float]:
    out = {s: sum(r[s] for r in body["seconds"]) for s in STATES}
    out["lost"] = sum(r["seconds"] for r in body["lost"])
    return out


def lost_by_cause(body: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in body["lost"]:
        out[r["cause"]] = out.get(r["cause"], 0.0) + r["seconds"]
    return out


def wait_for(url: str, observed: float, timeout: float = 40.0) -> dict[str, Any]:
    """The roll-ups once they cover ``observed`` GPU-seconds (the last block commits when the replay ends)."""
    deadline = time.monotonic() + timeout
    while True:
        body = rollup(url)
        if totals(body)["observed"] >= observed - 0.01:
            return body
        assert time.monotonic() < deadline, f"roll-ups stuck at {totals(body)}"
        time.sleep(0.2)


def counters(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = requests.get(url + "/metrics", timeout=5).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name in ("gpuwatch_gpu_seconds_total", "gpuwatch_gpu_lost_seconds_total")}


@pytest.mark.parametrize("fault", ["launch_bound", "idle_memory", "gil_threads"])
def test_a_replayed_fault_is_counted_to_the_second_on_its_cause_and_a_restart_counts_nothing_twice(
        tmp_path: Path, fault: str) -> None:
    path = FAULTS / f"{fault}.ndjson.gz"
    want = expected_seconds(path)
    gw = start(tmp_path, path)
    try:
        body = wait_for(gw.url, want["observed"])
        for key, value in totals(body).items():
            assert value == pytest.approx(want[key], abs=0.01), key
        assert lost_by_cause(body) == {expected_cause(path): pytest.approx(want["lost"], abs=0.01)}
        metrics = counters(gw.url)
        for state in STATES:
            assert metrics[("gpuwatch_gpu_seconds_total", (("gpu", "0"), ("state", state)))] == \
                pytest.approx(want[state], abs=0.01)
        lost = {dict(k[1])["cause"]: v for k, v in metrics.items() if k[0] == "gpuwatch_gpu_lost_seconds_total"}
        assert lost == {expected_cause(path): pytest.approx(want["lost"], abs=0.01)}
        assert gw.stop() == 0
        again = start(tmp_path, path, name="gw2")  # the same recording into the same state: all skipped
        time.sleep(7.0)  # past the idle flush
        assert rollup(again.url)["seconds"] == body["seconds"] and rollup(again.url)["lost"] == body["lost"]
        assert not any(v for v in counters(again.url).values())
        assert again.stop() == 0
    finally:
        gw.kill()


def test_kill_9_in_the_middle_loses_nothing_and_counts_nothing_twice(tmp_path: Path) -> None:
    path = tmp_path / "incident.ndjson.gz"  # the bundled recording's samples, all of them: a copy is played
    shutil.copyfile(bundled_recording(), path)  # from its start (the demo itself skips its idle lead-in)
    want = expected_seconds(path)
    gw = start(tmp_path, path, speed="25")
    again: DaemonProcess | None = None
    try:
        deadline = time.monotonic() + 30
        while not 60 < totals(rollup(gw.url))["observed"] < want["observed"] - 60:
            assert time.monotonic() < deadline, "no commit in the middle of the replay"
            time.sleep(0.1)
        gw.kill()  # SIGKILL: no flush, no cleanup
        with sqlite3.connect(tmp_path / "state" / "efficiency.sqlite") as db:
            committed = db.execute("SELECT sum(observed) FROM gpu_seconds").fetchone()[0]
        assert 60 < committed < want["observed"] - 60
        # the second daemon replays the whole file: what was committed is skipped, the rest added once
        again = start(tmp_path, path, name="gw2")
        body = wait_for(again.url, want["observed"])
        time.sleep(6.0)  # nothing more arrives after the end
        for key, value in totals(rollup(again.url)).items():
            assert value == pytest.approx(want[key], abs=0.01), key
        assert sum(lost_by_cause(body).values()) == pytest.approx(want["lost"], abs=0.01)
        assert again.stop() == 0
    finally:
        gw.kill()
        if again is not None:
            again.kill()
