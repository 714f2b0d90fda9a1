"""The doctor judges the current window: a finding goes away within one window of the load changing, and
says since when it holds. Checked on H200 fault recordings joined end to end (Python-bound, then a healthy
GEMM), through the function, the dashboard's analysis and a real daemon's /api/v1/diagnosis."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from daemon.conftest import RunningDaemon

from gpuwatch.config import Config, DaemonConfig
from gpuwatch.config.model import ExporterConfig
from gpuwatch.doctor import RECENT_WINDOW_S, LiveDoctor, current, diagnose_current
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
    """A real daemon replays the load at ten times its pace, its doctor asked as it runs (the refresh thread
    every second of wall time, the GPU-hour accounting, the API): the Python-bound finding, gone from the
    window about 10 s after the change, is dropped once it has been missing for the hysteresis' dwell
    (half a window, at least two calls), long before the replay's end 40 s after the change."""
    history, (_, change, *_) = joined("python_preprocess", "healthy", "healthy", "healthy", "healthy")
    assert history[-1].time - change >= RECENT_WINDOW_S + RECENT_WINDOW_S / 2 - 5
    path = tmp_path / "changes.ndjson.gz"
    with RecordingWriter(path, RecordingHeader(created=time.time(), interval_s=1.0)) as w:
        for snap in history:
            w.write(snap)
    config = Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s")),
                    exporter=ExporterConfig(diagnosis_interval=1.0))
    d = RunningDaemon(config, path, speed=10.0)
    try:
        d.wait_evaluated(len(history), timeout=60)
        now = requests.get(d.url + "/api/v1/diagnosis", timeout=30).json()
        bad = [requests.get(d.url + f"/api/v1/diagnosis?window={w}", timeout=5).status_code for w in ("nan", "-5")]
        runs = d.daemon.diagnosis.runs
    finally:
        d.stop()
    assert runs >= 3  # the live doctor was asked while the replay ran, not only at its end
    assert now["window_s"] == RECENT_WINDOW_S and "input_cpu_bound" not in codes(now["findings"])
    assert "healthy" in codes(now["findings"]) and all(f["since"] for f in now["findings"])
    assert bad == [400, 400]


def _live_against_fresh(history: list[Snapshot], monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """Asks a LiveDoctor and a fresh search every 5 snapshots of a growing history; checks they agree
    and returns how many diagnoses each ran."""
    calls = {"n": 0}
    real = current.diagnose

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(current, "diagnose", counted)
    live = LiveDoctor(RECENT_WINDOW_S, dwell_s=0)  # the since-cache alone: no hysteresis to compare
    live_calls = fresh_calls = 0
    for end in range(10, len(history), 5):
        grown = history[:end]
        calls["n"] = 0
        got = [(f.code, f.gpu_index, f.pid, f.since) for f in live(grown)]
        live_calls += calls["n"]
        calls["n"] = 0
        want = [(f.code, f.gpu_index, f.pid, f.since) for f in diagnose_current(grown, RECENT_WINDOW_S)]
        fresh_calls += calls["n"]
        # the same findings; "since" on a half-window grid either way, so they may differ by one step
        assert [g[:3] for g in got] == [w[:3] for w in want], f"at snapshot {end}"
        assert all(abs(g[3] - w[3]) <= RECENT_WINDOW_S / 2 for g, w in zip(got, want, strict=True))
    return live_calls, fresh_calls


def test_asked_every_5_s_the_live_doctor_finds_what_a_fresh_search_finds_as_the_load_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    live, fresh = _live_against_fresh(joined("python_preprocess", "healthy", "healthy")[0], monkeypatch)
    assert live < fresh


def test_on_a_steady_incident_the_live_doctor_runs_one_diagnosis_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    history = joined(*["python_preprocess"] * 7)[0]  # ~70 s of one steady incident
    live, fresh = _live_against_fresh(history, monkeypatch)
    asks = len(range(10, len(history), 5))
    # a fresh search steps back over the whole incident every time: 3 diagnoses a call on these ~70 s,
    # up to 41 on the 10 minutes the dashboard keeps
    assert live <= asks + 3 and fresh >= 2 * asks


def test_asked_once_a_window_as_the_daemon_asks_a_steady_finding_keeps_its_since_at_one_diagnosis_a_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon refreshes its findings once a window (every 30 s over a 30 s window): each window starts
    where the last one ended, and a finding found in both held all along, as when windows overlap. Were only
    overlapping windows taken as continuing, every refresh would step back over the whole history again (up
    to 40 more diagnoses) and start the hysteresis afresh."""
    calls = {"n": 0}
    real = current.diagnose

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(current, "diagnose", counted)
    history = joined(*["python_preprocess"] * 20)[0]  # ~200 s of one steady incident
    live = LiveDoctor(RECENT_WINDOW_S)
    per_call, tops = [], []
    due = history[0].time + RECENT_WINDOW_S
    for i, snap in enumerate(history):
        if snap.time >= due:
            due = snap.time + RECENT_WINDOW_S
            calls["n"] = 0
            found = live(history[:i + 1])
            per_call.append(calls["n"])
            tops.append((found[0].code, found[0].since))
    assert len(per_call) >= 5
    assert per_call[1:] == [1] * (len(per_call) - 1)
    assert tops == [("input_cpu_bound", history[0].time)] * len(tops)
