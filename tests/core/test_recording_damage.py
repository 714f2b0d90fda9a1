"""Recordings that are well-formed JSON but not one machine's truth: the same GPU or process twice, time that
does not move forward, negative percentages, and a looping replay asked for a moment days away."""

from __future__ import annotations

import dataclasses
import gzip
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hwm import peak_mib
from prometheus_client.parser import text_string_to_metric_families

from core.factories import full_snapshot
from gpuwatch.efficiency.ledger import MAX_HISTORY, Ledger
from gpuwatch.efficiency.offline import account_recording
from gpuwatch.efficiency.rows import SecondsRow
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model.codec import snapshot_to_dict
from gpuwatch.model.recording import MAGIC, RecordingError, load

T0 = 1_764_666_000.0
HWM = Path(__file__).parents[1] / "hwm.py"


def write(path: Path, snapshots: list[dict[str, object]], interval: float = 1.0) -> Path:
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({MAGIC: 1, "created": T0, "interval_s": interval, "hostname": "h"}) + "\n")
        for s in snapshots:
            f.write(json.dumps(s) + "\n")
    return path


def snap_dict(t: float, **changes: object) -> dict[str, object]:
    return {**snapshot_to_dict(full_snapshot(t)), **changes}


@pytest.mark.parametrize(("where", "message"), [("gpus", "gpus[2]: GPU 0 is listed twice"),
                                                ("processes", "processes[2]: pid 471 on GPU 0 is listed twice")])
def test_a_gpu_or_a_process_row_twice_in_one_snapshot_is_refused_with_its_file_and_line(
        tmp_path: Path, where: str, message: str) -> None:
    """Read as they are, they gave two /metrics series of one name and labels (and counted twice)."""
    base = snapshot_to_dict(full_snapshot(T0))
    doubled = {**base, where: [*base[where], base[where][0]]}  # type: ignore[misc]
    path = write(tmp_path / "dup.ndjson.gz", [base, doubled])
    with pytest.raises(RecordingError, match=re.escape(f"dup.ndjson.gz:3: {message} in one snapshot")):
        load(path)


def test_a_snapshot_read_back_gives_each_series_once(tmp_path: Path) -> None:
    snaps = load(write(tmp_path / "ok.ndjson.gz", [snapshot_to_dict(full_snapshot(T0))]))
    body = render(Exporter(SnapshotCollector(lambda: snaps[0], lambda: (), max_process_series=64)).registry)
    series = [(s.name, tuple(sorted(s.labels.items()))) for f in text_string_to_metric_families(body.decode())
              for s in f.samples]
    assert len(series) == len(set(series))


@pytest.mark.parametrize(("where", "field"), [("gpus", "gpu_util"), ("processes", "sm_util"),
                                              ("processes", "cpu_percent")])
def test_a_negative_percentage_is_refused_with_its_file_and_line(tmp_path: Path, where: str, field: str) -> None:
    bad = snap_dict(T0 + 1)
    bad[where][0][field] = -5.0  # type: ignore[index]
    path = write(tmp_path / "neg.ndjson.gz", [snap_dict(T0), bad])
    with pytest.raises(RecordingError, match=rf"neg.ndjson.gz:3: {where}\[0\].{field}: -5.0 is a negative percentage"):
        load(path)


def test_time_that_does_not_move_forward_counts_one_interval_a_step_and_is_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    forward = [snap_dict(T0 + i) for i in range(40)]
    stuck = [snap_dict(T0) for _ in range(40)]  # a clock that never moved
    with caplog.at_level(logging.WARNING):
        moving = account_recording(write(tmp_path / "forward.ndjson.gz", forward)).rollup
        frozen = account_recording(write(tmp_path / "stuck.ndjson.gz", stuck)).rollup
    said = [r for r in caplog.records if "is not after the one before" in r.getMessage()]
    assert len(said) == 1

    def observed(rows: list[SecondsRow]) -> float:
        return sum(r.states.observed for r in rows)

    assert observed(frozen.seconds) == pytest.approx(observed(moving.seconds))
    assert observed(frozen.seconds) == pytest.approx(39 * 2)  # 39 intervals of 1 s on each of 2 GPUs


def test_the_ledger_holds_a_bounded_window_whatever_the_times_say() -> None:
    ledger = Ledger(max_gap=5.0, doctor=lambda window: [])
    snap = full_snapshot(T0)
    for i in range(MAX_HISTORY + 500):
        ledger.add(dataclasses.replace(snap, time=T0 + i * 1e-6))  # a clock that barely moves
    assert len(ledger._history) <= MAX_HISTORY


def test_report_streams_a_recording_with_a_stuck_clock_in_bounded_memory(tmp_path: Path) -> None:
    """Before: every snapshot of a stuck clock stayed in the ledger's window (50 000 of them: 114 MB)."""
    line = json.dumps({"schema": 1, "time": T0, "host": {"hostname": "h"},
                       "gpus": [{"index": 0, "uuid": "GPU-0", "gpu_util": 50.0}],
                       "processes": [{"pid": 7, "gpu_index": 0, "gpu_memory_bytes": 1 << 30, "name": "python"}]})
    path = tmp_path / "stuck.ndjson.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({MAGIC: 1, "created": T0, "interval_s": 1.0}) + "\n")
        f.write((line + "\n") * 20_000)
    hwm = tmp_path / "hwm"
    done = subprocess.run([sys.executable, str(HWM), "report", "--replay", str(path), "--json"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "HWM_FILE": str(hwm)})
    assert done.returncode == 0, done.stderr[-500:]
    assert peak_mib(hwm) < 100, f"{peak_mib(hwm):.0f} MiB"
    report = json.loads(done.stdout)
    assert report["gpu_hours"]["allocated"] == pytest.approx(19_999 / 3600, rel=1e-3)


def test_snapshot_at_a_moment_days_into_a_looping_replay_takes_it_within_one_pass(tmp_path: Path) -> None:
    path = write(tmp_path / "short.ndjson.gz", [snap_dict(T0 + i) for i in range(10)])
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gpuwatch", "snapshot", "--replay", str(path), "--loop", "--at",
                           "1e9", "--json"], capture_output=True, text=True, timeout=60, check=False)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "past the end of the looping recording (10 s a pass)" in done.stderr
    shown = json.loads(done.stdout)
    assert shown["time"] - T0 == 1e9 % 10  # the same moment of a pass
    assert took < 30
