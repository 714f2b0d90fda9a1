"""The daemon facing bad input at run time: a reload with a large rule file keeps serving, a recording that
turns bad part-way stops sampling with one line and an unhealthy /healthz, a truncated recording says so."""

from __future__ import annotations

import gzip
import json
import logging
import threading
import time
from pathlib import Path

import pytest
import requests

from daemon.conftest import RunningDaemon
from daemon.incident import write_recording
from gpuwatch.config import AlertsConfig, Config, DaemonConfig
from gpuwatch.model.recording import iter_snapshots

RULE = """\
      - alert: Rule{i}
        condition:
          all:
            - threshold: {{metric: gpu.mem_used_percent, op: ">=", value: 70}}
            - threshold: {{metric: gpu.util, op: "<", value: 30}}
        for: 10s
        annotations: {{summary: "GPU {{{{ $labels.gpu }}}} rule {i}"}}
"""


@pytest.mark.serial  # a latency bound (0.5 s): four busy workers on two cores stalled it once (0.63 s)
def test_a_reload_of_a_large_rule_file_does_not_stall_healthz(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text("groups: []\n")  # it starts with none: the reload is what brings the 3000 in
    config = Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s")),
                    alerts=AlertsConfig(rule_paths=(str(rules),)))
    recording = write_recording(tmp_path / "r.ndjson.gz", n=120)
    d = RunningDaemon(config, recording, speed=5.0)
    try:
        assert len(d.daemon.engine.rules) == 0
        rules.write_text("groups:\n  - name: big\n    rules:\n" + "".join(RULE.format(i=i) for i in range(3000)))
        assert rules.stat().st_size < 1024 * 1024
        latencies: list[float] = []
        done = threading.Event()

        def reload() -> None:
            d.daemon.loop.call_soon_threadsafe(lambda: d.daemon.loop.create_task(d.daemon.reload()))  # type: ignore[union-attr]

        started = time.monotonic()
        reload()
        while time.monotonic() - started < 8 and not done.is_set():
            t0 = time.monotonic()
            assert requests.get(d.url + "/healthz", timeout=10).status_code == 200
            latencies.append(time.monotonic() - t0)
            if len(d.daemon.engine.rules) == 3000 and len(latencies) > 5:
                done.set()
            time.sleep(0.02)
    finally:
        d.stop()
    assert done.is_set(), "the reload did not finish"
    assert max(latencies) < 0.5, max(latencies)


def test_a_recording_that_turns_bad_stops_sampling_with_one_line_and_healthz_503(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good = write_recording(tmp_path / "good.ndjson.gz", n=20)
    with gzip.open(good, "rt") as f:
        lines = f.read().splitlines()
    lines.insert(11, json.dumps({**json.loads(lines[10]), "time": "noon"}))  # line 12 has a string time
    bad = tmp_path / "bad.ndjson.gz"
    with gzip.open(bad, "wt") as f:
        f.write("\n".join(lines) + "\n")
    config = Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s")))
    with caplog.at_level(logging.INFO):
        d = RunningDaemon(config, bad)
        try:
            deadline = time.monotonic() + 10
            while not d.daemon.sampler.finished.is_set():
                assert time.monotonic() < deadline
                time.sleep(0.02)
            health = requests.get(d.url + "/healthz", timeout=5)
        finally:
            d.stop()
    assert health.status_code == 503
    assert health.json()["sampler"] == "failed"
    assert health.json()["sampler_error"].endswith("bad.ndjson.gz:12: time: expected a number, got str")
    stopped = [r for r in caplog.records if "sampling stopped" in r.getMessage()]
    assert len(stopped) == 1 and not stopped[0].exc_info


def test_a_truncated_recording_replays_what_is_complete_and_says_so(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    whole = write_recording(tmp_path / "whole.ndjson.gz", n=200).read_bytes()
    cut = tmp_path / "cut.ndjson.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    with caplog.at_level(logging.WARNING):
        snaps = list(iter_snapshots(cut))
    assert 0 < len(snaps) < 200
    assert any("ends early" in r.getMessage() or "cut off" in r.getMessage() for r in caplog.records)
