"""The doctor judges the current window: a finding goes away within one window of the load changing, and
says since when it holds. Checked on H200 fault recordings joined end to end (Python-bound, then a healthy
GEMM), through the function, the dashboard's analysis and a real daemon's /api/v1/diagnosis."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import requests
from daemon.conftest import RunningDaemon

from gpuwatch.config import Config, DaemonConfig
from gpuwatch.doctor import RECENT_WINDOW_S, diagnose_current
from gpuwatch.model.recording import RecordingHeader, RecordingWriter, load
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.tui import analysis

FAULTS = Path(__file__).parent / "fixtures" / "faults"


def joined(*names: str) -> tuple[list[Snapshot], list[float]]:
    """The recordings one after another on one clock, 1 s apart; and the time each part starts."""
    out: list[Snapshot] = []
    starts = []
    for name in names:
        part = load(FAULTS / f"{name}.ndjson.gz")
        t = out[-1].time + 1.0 if out else part[0].time
        starts.append(t)
        out += [dataclasses.replace(s, time=t + (s.time - part[0].time), seq=len(out) + i) for i, s in enumerate(part)]
    return out, starts


def codes(findings: list) -> set[str]:
    return {f.code if hasattr(f, "code") else f["code"] for f in findings}


def test_a_finding_holds_since_the_start_of_its_load_and_goes_within_one_window() -> None:
    history, (_, change, _) = joined("python_preprocess", "healthy", "healthy")
    before = [s for s in history if s.time < change]
    findings = diagnose_current(before, RECENT_WINDOW_S)
    top = findings[0]
    assert top.code == "input_cpu_bound" and top.since == before[0].time
    after = [s for s in history if s.time <= change + RECENT_WINDOW_S]
    assert "input_cpu_bound" not in codes(diagnose_current(after, RECENT_WINDOW_S))
    now = diagnose_current(history, RECENT_WINDOW_S)
    assert [f.code for f in now if f.severity != "info"] == []
    healthy = next(f for f in now if f.code == "healthy")
    assert healthy.since is not None and change - RECENT_WINDOW_S / 2 <= healthy.since <= change + RECENT_WINDOW_S / 2


def test_the_dashboard_pane_judges_the_same_recent_window() -> None:
    history, _ = joined("python_preprocess", "healthy", "healthy")
    findings, note = analysis.diagnose(history, RECENT_WINDOW_S)
    assert note == "" and findings is not None and "input_cpu_bound" not in codes(findings)
    assert all(f.since is not None for f in findings)


def test_the_daemon_drops_a_finding_once_the_replayed_load_changes(tmp_path: Path) -> None:
    history, _ = joined("python_preprocess", "healthy", "healthy")
    path = tmp_path / "changes.ndjson.gz"
    with RecordingWriter(path, RecordingHeader(created=time.time(), interval_s=1.0)) as w:
        for snap in history:
            w.write(snap)
    d = RunningDaemon(Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s"))), path)
    try:
        d.wait_evaluated(len(history), timeout=30)
        now = requests.get(d.url + "/api/v1/diagnosis", timeout=30).json()
        bad = [requests.get(d.url + f"/api/v1/diagnosis?window={w}", timeout=5).status_code for w in ("nan", "-5")]
    finally:
        d.stop()
    assert now["window_s"] == RECENT_WINDOW_S and "input_cpu_bound" not in codes(now["findings"])
    assert "healthy" in codes(now["findings"]) and all(f["since"] for f in now["findings"])
    assert bad == [400, 400]
