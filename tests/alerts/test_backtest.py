"""Backtests: the shipped rules over the incident, synthetic here and the bundled H200 recording when
present: the low-utilisation alert fires in the naive phase and not once the GPU is busy."""

from __future__ import annotations

import pytest

from alerts.incident import incident_trace, phase_bounds
from gpuwatch.alerts import DEFAULT_RULES, load_rules
from gpuwatch.alerts.backtest import Backtest, format_timeline, run_backtest
from gpuwatch.data import bundled_recording
from gpuwatch.model.recording import load
from gpuwatch.model.snapshot import Snapshot

INCIDENT = "GpuMemoryHeldWhileIdle"


def busy_start(snaps: list[Snapshot]) -> float:
    """When the GPU got busy: the first of 10 consecutive snapshots with GPU-Util >= 80 % after memory was
    held (found in the data, so the test does not depend on where the recording starts)."""
    run = 0
    for i, s in enumerate(snaps):
        g = s.gpus[0] if s.gpus else None
        run = run + 1 if g is not None and (g.gpu_util or 0) >= 80 else 0
        if run == 10:
            return snaps[i - 9].time
    raise AssertionError("the trace has no busy phase")


def firing_at(bt: Backtest, name: str, t: float) -> bool:
    """Was an alert of rule ``name`` firing at time ``t`` (between its firing and resolved)?"""
    since: dict[str, float] = {}
    spans: list[tuple[float, float]] = []
    for tr in bt.transitions:
        if tr.alert.name != name:
            continue
        if tr.alert.state == "firing":
            since[tr.alert.fingerprint] = tr.time
        elif tr.previous == "firing" and tr.alert.fingerprint in since:
            spans.append((since.pop(tr.alert.fingerprint), tr.time))
    spans += [(s, float("inf")) for s in since.values()]
    return any(a <= t < b for a, b in spans)


def assert_fires_while_naive_and_not_when_busy(snaps: list[Snapshot]) -> None:
    rules = load_rules([DEFAULT_RULES])
    bt = run_backtest(rules, snaps)
    busy = busy_start(snaps)
    keep = rules.rule(INCIDENT).keep_firing_for_s  # type: ignore[union-attr]
    naive_times = [s.time for s in snaps if s.time < busy]
    busy_times = [s.time for s in snaps if busy + keep <= s.time]
    assert any(firing_at(bt, INCIDENT, t) for t in naive_times), format_timeline(bt)
    assert not any(firing_at(bt, INCIDENT, t) for t in busy_times), format_timeline(bt)


def test_incident_alert_fires_in_the_naive_phase_and_resolves_when_busy() -> None:
    snaps = incident_trace()
    assert_fires_while_naive_and_not_when_busy(snaps)


def test_timeline_tells_the_incident_story() -> None:
    snaps = incident_trace()
    start = snaps[0].time
    bt = run_backtest(load_rules([DEFAULT_RULES]), snaps)
    fired = {tr.alert.name: tr.time - start for tr in bt.transitions if tr.alert.state == "firing"}
    naive, batched = phase_bounds()["naive"], phase_bounds()["batched"]
    assert naive[0] + 300 <= fired[INCIDENT] < naive[1]  # for: 5m after the memory was taken
    assert naive[0] + 120 <= fired["ProcessThreadCpuBound"] < naive[1]
    assert "GpuTensorCoresIdleUnderLoad" not in fired  # batched FP32 lasts 45 s, the rule waits 2 min
    assert "GpuMemoryVolatile" not in fired  # taking the memory pool once is a step, not volatility
    assert all(t >= batched[0] for name, t in fired.items() if name == "GpuClockThrottled")
    text = format_timeline(bt, "incident")
    assert "firing    GpuMemoryHeldWhileIdle" in text
    assert "holds 75% of its memory while GPU-Util stays low" in text
    assert text.splitlines()[0].startswith("incident: 465 snapshots over 7m44s")


def test_backtests_are_deterministic() -> None:
    rules = load_rules([DEFAULT_RULES])
    a, b = run_backtest(rules, incident_trace()), run_backtest(rules, incident_trace())
    assert [t.to_dict() for t in a.transitions] == [t.to_dict() for t in b.transitions]
    assert format_timeline(a) == format_timeline(b)


@pytest.mark.skipif(not bundled_recording().exists(), reason="the bundled H200 recording is not in this checkout")
def test_bundled_h200_recording_fires_the_incident_alert_while_naive_only() -> None:
    assert_fires_while_naive_and_not_when_busy(load(bundled_recording()))
