"""Properties of the alert state machine over arbitrary traces (hypothesis): legal transitions only, never
firing before ``for``, resolved only after firing, the same answer every run, and agreement with a
ten-line model of Prometheus' rule evaluation (plus the engine's one rule for gaps)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts.build import engine_for, gpu, snap
from gpuwatch.alerts import Transition
from gpuwatch.alerts.windows import Window, quantile
from gpuwatch.model.snapshot import Snapshot

LOW = '{threshold: {metric: gpu.util, op: "<", value: 30}}'
LEGAL = {("inactive", "pending"), ("inactive", "firing"), ("pending", "firing"), ("pending", "inactive"),
         ("firing", "resolved")}

#: Mostly ordinary sampling intervals, sometimes a gap longer than the engine's 5-minute limit.
gaps = st.one_of(st.floats(0.5, 120.0), st.floats(0.5, 120.0), st.floats(0.5, 120.0), st.floats(301.0, 3000.0))
steps = st.lists(st.tuples(gaps, st.one_of(st.none(), st.floats(0, 100))), min_size=1, max_size=60)
durations = st.sampled_from([0, 5, 30, 60, 300])


def trace(items: list[tuple[float, float | None]]) -> list[Snapshot]:
    t, out = 0.0, []
    for dt, value in items:
        t += dt
        out.append(snap(t, [gpu(util=value)]))
    return out


def evaluate(items: list[tuple[float, float | None]], for_s: int, keep_s: int) -> tuple[list[Transition], list[str]]:
    engine = engine_for(LOW, for_=f"{for_s}s", keep=f"{keep_s}s")
    transitions, states = [], []
    for s in trace(items):
        transitions.extend(engine.evaluate(s))
        alerts = engine.alerts()
        states.append(alerts[0].state if alerts else "-")
    return transitions, states


def model(items: list[tuple[float, float | None]], for_s: int, keep_s: int) -> list[str]:
    """Prometheus' alerting-rule evaluation for one series, written independently of the engine (over the
    very timestamps the engine sees, so float rounding at a boundary cannot tell them apart)."""
    state, since, keep_since, resolved_at, last, out = "-", 0.0, None, 0.0, None, []
    for s, (_, value) in zip(trace(items), items, strict=True):
        t, dt, last = s.time, s.time - (last if last is not None else s.time), s.time
        if value is not None and value < 30:
            if state in ("-", "resolved") or (state == "pending" and dt > 300):  # nobody looked: restart for
                state, since = "pending", t
            keep_since = None
            if state == "pending" and t - since >= for_s:
                state = "firing"
        elif state == "pending":
            state = "-"
        elif state == "firing":
            keep_since = t if keep_since is None else keep_since
            if not (keep_s and t - keep_since < keep_s):
                state, resolved_at = "resolved", t
        elif state == "resolved" and t - resolved_at > 900:  # listed for 15 minutes after resolving
            state = "-"
        out.append(state)
    return out


@settings(max_examples=150, deadline=None)
@given(steps, durations, durations)
def test_only_legal_transitions_and_never_firing_before_for(items: list[tuple[float, float | None]], for_s: int,
                                                            keep_s: int) -> None:
    transitions, _ = evaluate(items, for_s, keep_s)
    for tr in transitions:
        assert (tr.previous, tr.alert.state) in LEGAL
        if tr.alert.state == "firing":
            assert tr.alert.fired_at is not None and tr.alert.active_since is not None
            assert tr.alert.fired_at - tr.alert.active_since >= for_s
        if tr.alert.state == "resolved":
            assert tr.previous == "firing" and tr.alert.fired_at is not None


@settings(max_examples=150, deadline=None)
@given(steps, durations, durations)
def test_engine_matches_the_prometheus_model(items: list[tuple[float, float | None]], for_s: int,
                                             keep_s: int) -> None:
    assert evaluate(items, for_s, keep_s)[1] == model(items, for_s, keep_s)


@settings(max_examples=50, deadline=None)
@given(steps, durations, durations)
def test_the_same_trace_gives_the_same_transitions(items: list[tuple[float, float | None]], for_s: int,
                                                   keep_s: int) -> None:
    first, _ = evaluate(items, for_s, keep_s)
    second, _ = evaluate(items, for_s, keep_s)
    assert [t.to_dict() for t in first] == [t.to_dict() for t in second]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-7200, 7200), min_size=2, max_size=40), durations)
def test_any_clock_order_keeps_times_consistent(times: list[float], for_s: int) -> None:
    """Whatever the clock does, an alert never fires before its ``for`` and times in it stay ordered."""
    engine = engine_for(LOW, for_=f"{for_s}s")
    for t in times:
        for tr in engine.evaluate(snap(t, [gpu(util=10)])):
            a = tr.alert
            assert a.active_since is not None
            if a.fired_at is not None:
                assert a.fired_at - a.active_since >= for_s


@given(st.lists(st.tuples(st.floats(0.05, 30.0), st.sampled_from([0.0, -0.0, 1.0, 37.5, 1e11, 0.1, math.inf])
                          | st.floats(allow_nan=True)), min_size=1, max_size=300),
       st.sampled_from([1.0, 10.0, 60.0]), st.sampled_from([0.0, 0.5, 0.9, 1.0]))
@settings(max_examples=200, deadline=None)
def test_a_quantile_windows_kept_order_gives_what_sorting_its_samples_gives(
        items: list[tuple[float, float]], window_s: float, q: float) -> None:
    """A quantile rule reads a window whose values are kept in order as they come and go: after any sequence
    of samples (repeats, infinities, a NaN) its quantile is the one sorting the window's samples gives."""
    window, t = Window(ordered=True), 0.0
    for dt, value in items:
        t += dt
        window.add(t, value)
        window.advance(t, window_s, 0.0)
        want, got = quantile(window.values(), q), quantile(window.sorted_values(), q, is_sorted=True)
        assert got == want or (math.isnan(got) and math.isnan(want))


@given(st.lists(st.tuples(st.floats(0.05, 30.0), st.sampled_from([0.0, 1.0, 37.5, 1e11, 0.1]) | st.floats(0, 1e6)),
                min_size=1, max_size=300), st.sampled_from([1.0, 10.0, 60.0]))
@settings(max_examples=200, deadline=None)
def test_a_windows_running_sum_and_change_count_match_its_samples(items: list[tuple[float, float]],
                                                                  window_s: float) -> None:
    """The mean, share and flap rate read a running sum and count: after any sequence of samples coming
    and going they equal what the samples in the window give."""
    window, t = Window(), 0.0
    for dt, value in items:
        t += dt
        window.add(t, value)
        window.advance(t, window_s, 0.0)
        values = window.values()
        assert window.total == pytest.approx(math.fsum(values), rel=1e-9, abs=1e-6)
        assert window.changes == sum(a != b for a, b in itertools.pairwise(values))


def test_a_window_holding_both_infinities_reads_a_nan_mean_instead_of_raising() -> None:
    window = Window(ordered=True)
    for t, v in ((1.0, 0.0), (1.0, math.inf), (1.0, -math.inf), (2.0, 1.0)):
        window.add(t, v)
    window.advance(2.0, 0.5, 0.0)  # the first three leave: the running total is summed again
    assert window.mean() == 1.0
    window.add(3.0, math.inf)
    window.add(3.0, -math.inf)
    window.advance(3.0, 0.5, 0.0)
    assert math.isnan(window.mean())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.5, 7.0]), st.floats(-1e6, 1e6)), min_size=0, max_size=80),
       st.sampled_from([10.0, 30.0, 60.0]))
def test_a_windows_halves_are_the_points_on_each_side_of_its_midpoint_the_midpoint_in_both(
        items: list[tuple[float, float]], window_s: float) -> None:
    """``m[w/2] offset w/2`` and ``m[w/2]`` in Prometheus 2.x: closed ranges, so a point on the midpoint is in
    both halves (the windows find the midpoint by bisection; this is the point-by-point definition)."""
    window, t = Window(), 0.0
    for dt, value in items:
        t += dt
        window.add(t, value)
        window.advance(t, window_s, keep_s=0.0)
    mid = t - window_s / 2
    assert window.older_half(t, window_s) == [v for s, v in window.points if s <= mid]
    assert window.recent_half(t, window_s) == [v for s, v in window.points if s >= mid]
