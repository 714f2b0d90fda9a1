"""Hysteresis of the live doctor: a finding's severity, and its appearing and disappearing, do not flap on
noise around a rule's cut-off; a figure that really moves, and stays, still changes what is shown."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwatch.data import bundled_recording
from gpuwatch.doctor import LIVE_WINDOW_S, RECENT_WINDOW_S, LiveDoctor
from gpuwatch.doctor.current import key
from gpuwatch.doctor.diagnose import rules_out
from gpuwatch.doctor.steady import Steady
from gpuwatch.model.finding import Finding
from gpuwatch.model.recording import load
from gpuwatch.model.severity import Severity


def found(severity: Severity, score: float, code: str = "input_cpu_bound") -> Finding:
    return Finding(code, "Input pipeline CPU-bound", severity, score, 0, 558, ("evidence",), "fix")


def shown(steady: Steady, calls: list[list[Finding]], every_s: float = 5.0) -> list[str]:
    """What is shown after each call: the severity's initial, '-' when the finding is not shown."""
    out = []
    for i, fs in enumerate(calls):
        got = steady(fs, i * every_s, key)
        out.append(got[0].severity[0] if got else "-")
    return out


def test_severity_noise_around_the_cut_off_changes_nothing() -> None:
    # the input-bound rule's score crosses 78 at GPU-Util 30 %: 78.4 / 77.6 is 29 % / 31 %
    noise = [found("warning", 77.6) if i % 3 == 2 else found("critical", 78.4) for i in range(30)]
    assert set(shown(Steady(15.0), [[f] for f in noise])) == {"c"}


def test_a_severity_found_for_a_while_but_inside_the_band_is_not_shown() -> None:
    calls = [[found("critical", 78.4)]] * 3 + [[found("warning", 77.8)]] * 10
    assert shown(Steady(15.0), calls) == ["c"] * 13


def test_a_figure_that_crosses_the_band_and_stays_changes_the_severity_after_the_dwell() -> None:
    calls = [[found("critical", 79.6)]] * 3 + [[found("warning", 75.2)]] * 6
    # found warning at calls 3, 4, 5, 6 (15 s after the first): shown from the fourth
    assert shown(Steady(15.0), calls) == ["c", "c", "c", "c", "c", "c", "w", "w", "w"]


def test_one_call_back_at_the_shown_severity_cancels_a_change() -> None:
    calls = [[found("critical", 80.0)], [found("warning", 74.0)], [found("warning", 74.0)],
             [found("critical", 80.0)], [found("warning", 74.0)], [found("warning", 74.0)], [found("warning", 74.0)]]
    assert shown(Steady(15.0), calls) == ["c", "c", "c", "c", "c", "c", "c"]


def test_a_finding_appears_at_once_and_disappears_only_once_missing_for_the_dwell() -> None:
    f = found("warning", 60.0)
    calls = [[], [f], [], [f], [], [], [], [], []]
    assert shown(Steady(15.0), calls) == ["-", "w", "w", "w", "w", "w", "w", "-", "-"]


def test_without_dwell_each_call_is_shown_as_found() -> None:
    calls = [[found("critical", 78.4)], [found("warning", 77.6)], []]
    assert shown(Steady(0.0, min_calls=1, score_band=0.0), calls) == ["c", "w", "-"]


@pytest.mark.parametrize("seconds", [LIVE_WINDOW_S, RECENT_WINDOW_S])
def test_on_the_bundled_recording_the_input_bound_finding_has_one_severity_in_every_window(seconds: float) -> None:
    """Asked every 5 s as the dashboard does, and over the doctor's shorter window: GPU-Util wanders between
    23 and 46 % while one CPU-bound loop holds the GPU back, and the finding's severity never flips, raw
    (no dwell) or shown, so the dashboard, ``doctor`` and ``--connect`` say the same."""
    snaps = load(bundled_recording())
    raw, steady = LiveDoctor(seconds, dwell_s=0), LiveDoctor(seconds)
    seen: dict[str, set[str]] = {"raw": set(), "shown": set()}
    for end in range(3, len(snaps), 5):
        for name, doctor in (("raw", raw), ("shown", steady)):
            f = next((f for f in doctor(snaps[:end]) if f.code == "input_cpu_bound"), None)
            if f is not None:
                seen[name].add(f.severity)
    assert seen["raw"] == seen["shown"] and len(seen["raw"]) == 1, seen


def test_what_is_shown_never_contradicts_itself_and_the_verdict_changes_only_once_the_change_holds() -> None:
    """A cause found where "no known cause fits" is shown displaces it once found for the dwell (the breakdown
    stays until then, never beside it); 'healthy' waits while a warning about that GPU is still shown."""
    lost = found("warning", 50.0, "idle_breakdown")
    cause = found("critical", 80.0, "input_cpu_bound")
    ok = found("info", 10.0, "healthy")
    calls = [[lost]] + [[cause]] * 4 + [[ok]] * 5
    steady = Steady(15.0, rules_out=rules_out)
    seen = [sorted(f.code for f in steady(fs, i * 5.0, key)) for i, fs in enumerate(calls)]
    assert seen[:4] == [["idle_breakdown"]] * 4  # found at 5, 10 and 15 s: not yet held for 15 s
    assert seen[4:8] == [["input_cpu_bound"]] * 4  # held from 5 s to 20 s: shown; the warning holds its dwell
    assert seen[8:] == [["healthy"]] * 2
    other_gpu = dataclasses.replace(cause, gpu_index=1)
    assert {f.code for f in Steady(15.0, rules_out=rules_out)([lost], 0.0, key) +
            Steady(15.0, rules_out=rules_out)([other_gpu], 5.0, key)} == {"idle_breakdown", "input_cpu_bound"}


def test_a_cause_found_in_one_window_on_a_rules_cut_off_does_not_swap_the_verdict() -> None:
    """A figure sitting on a rule's cut-off (a thread at 49-51 % of a core) gives the cause in one window and
    the breakdown in the next: what is shown stays the breakdown; raw (no dwell) shows each call as found."""
    lost = found("warning", 50.0, "idle_breakdown")
    cause = found("critical", 80.0, "input_cpu_bound")
    calls = [[lost], [cause], [lost], [lost], [cause], [lost], [cause], [lost]]
    steady = Steady(15.0, rules_out=rules_out)
    assert {f.code for i, fs in enumerate(calls) for f in steady(fs, i * 5.0, key)} == {"idle_breakdown"}
    raw = Steady(0.0, min_calls=1, rules_out=rules_out)
    assert [raw(fs, i * 5.0, key)[0].code for i, fs in enumerate(calls)] == [fs[0].code for fs in calls]


def test_on_the_bundled_recording_the_idle_start_is_not_shown_beside_the_cause_that_follows() -> None:
    """The recording's server sits idle for 10 s, then starts its CPU-bound load: asked every 5 s as the
    dashboard does, the pane never shows "no known cause fits" beside the input-bound finding."""
    snaps = load(bundled_recording())
    doctor = LiveDoctor(30.0)
    both = 0
    for end in range(3, 120, 5):
        codes = {f.code for f in doctor(snaps[:end])}
        both += {"idle_breakdown", "input_cpu_bound"} <= codes
    assert both == 0


def test_the_idle_breakdown_is_said_once_per_gpu_when_the_process_it_names_changes() -> None:
    """The breakdown names the GPU's feeding process; when that changes, the new one replaces the old at once
    instead of both being shown (one about a pegged process, one about an idle one)."""
    first = dataclasses.replace(found("warning", 40.0, "idle_breakdown"), pid=558)
    second = dataclasses.replace(first, pid=603)
    steady = Steady(15.0, rules_out=rules_out)
    steady([first], 0.0, key)
    assert [(f.code, f.pid) for f in steady([second], 5.0, key)] == [("idle_breakdown", 603)]


def test_the_top_finding_gives_way_to_one_of_the_same_severity_only_once_it_holds() -> None:
    """Two warnings about one GPU, the second found in every other window with a higher score: the verdict
    stays the first; found at every call for the dwell, it takes the top; a critical one takes it at once."""
    copies = dataclasses.replace(found("warning", 60.0, "h2d_copies"), pid=558)
    host = dataclasses.replace(found("warning", 90.0, "host_cpu_contention"), pid=558)
    steady = Steady(15.0, rules_out=rules_out)
    alternating = [[copies], [copies, host], [copies], [copies, host], [copies]]
    assert [steady(fs, i * 5.0, key)[0].code for i, fs in enumerate(alternating)] == ["h2d_copies"] * 5
    held = [steady([copies, host], (5 + i) * 5.0, key)[0].code for i in range(5)]
    assert held[0] == "h2d_copies" and held[-1] == "host_cpu_contention"
    worse = dataclasses.replace(found("critical", 80.0, "input_cpu_bound"), pid=558)
    assert steady([copies, host, worse], 50.0, key)[0].code == "input_cpu_bound"
