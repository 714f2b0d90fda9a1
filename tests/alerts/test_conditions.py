"""Each condition kind, as a table: a series of snapshots in, which steps the condition holds at out.

Patterns read left to right, one character per snapshot: ``X`` the condition holds, ``.`` it does not.
"""

from __future__ import annotations

import math

import pytest

from alerts.build import gpu, proc, snap
from gpuwatch.alerts.engine import build
from gpuwatch.alerts.entities import Frame
from gpuwatch.alerts.loader import parse_rules
from gpuwatch.alerts.rules import Condition
from gpuwatch.model.snapshot import Snapshot, SourceStatus

NAN = math.nan


def condition(text: str) -> Condition:
    rules = parse_rules(f"groups:\n- name: g\n  rules:\n  - alert: R\n    condition: {text}\n", "t.yml")
    return rules.rules[0].condition


def pattern(text: str, snaps: list[Snapshot]) -> str:
    """Feed the snapshots; X where the condition holds for any entity. Hysteresis latches on the alert
    being active, which (as for a rule without ``for``) is where the condition held one sample before."""
    ev = build(condition(text))
    out, active = "", frozenset()
    for s in snaps:
        result = ev.evaluate(Frame(s, s.time), active)
        active = frozenset(result)
        out += "X" if result else "."
    return out


def utils(values: list[float | None], step: float = 10.0, **kw: float) -> list[Snapshot]:
    return [snap(i * step, [gpu(util=v, **kw)]) for i, v in enumerate(values)]


def mems(values: list[float | None], step: float = 10.0) -> list[Snapshot]:
    return [snap(i * step, [gpu(mem=v)]) for i, v in enumerate(values)]


THRESHOLD = [
    ("below the value holds; None and NaN never hold",
     '{threshold: {metric: gpu.util, op: "<", value: 30}}', [10, 50, None, NAN, 20], "X...X"),
    ("a clear level holds on above it once crossed, and lets go at it",
     '{threshold: {metric: gpu.util, op: ">=", value: 90, clear: 80}}', [85, 95, 85, 81, 80, 85, 91], ".XXX..X"),
    ("hysteresis on a low threshold mirrors it",
     '{threshold: {metric: gpu.util, op: "<", value: 30, clear: 40}}', [35, 25, 35, 39, 40, 35], ".XXX.."),
    ("missing data ends the alert, and with it the latch (as in Prometheus)",
     '{threshold: {metric: gpu.util, op: ">", value: 90, clear: 80}}', [95, None, 85, NAN, 95, 85], "X...XX"),
    ("equality compares exactly", '{threshold: {metric: gpu.util, op: "==", value: 0}}', [0, 0.5, 0], "X.X"),
    ("avg compares the mean over [t-avg, t]: one spike does not break a low run",
     '{threshold: {metric: gpu.util, op: "<", value: 30, avg: 30s}}', [10, 10, 50, 10, 10, 10, 10], "XXXXXXX"),
    ("without avg the same spike breaks the run",
     '{threshold: {metric: gpu.util, op: "<", value: 30}}', [10, 10, 50, 10, 10, 10, 10], "XX.XXXX"),
    ("avg with clear holds on while the mean stays beyond clear",
     '{threshold: {metric: gpu.util, op: ">", value: 80, clear: 50, avg: 10s}}', [90, 90, 40, 40, 90], "XXX.."),
]


@pytest.mark.parametrize(("case", "cond", "values", "expected"), THRESHOLD, ids=[c[0] for c in THRESHOLD])
def test_threshold(case: str, cond: str, values: list[float | None], expected: str) -> None:
    assert pattern(cond, utils(values)) == expected


JITTER = '{jitter: {metric: gpu.mem_used_percent, rise: 20, window: 60s}}'
CLIMB = '{climb: {metric: gpu.mem_used_percent, window: 30s, limit: 100, within: 10m, rise: 4}}'
VOLATILITY = '{volatility: {metric: gpu.mem_used_percent, stddev: 10, window: 30s}}'
WINDOWED = [
    ("a spike that rose and fell back within the window holds while its peak is in the window",
     JITTER, [40] * 7 + [70, 40, 40, 40, 40, 40, 40, 40], "........XXXXX.."),
    ("a plateau is a rise, not a spike", JITTER, [40] * 7 + [70] * 8, "..............."),
    ("a rise slower than the window is not a spike", JITTER, [40 + 2 * i for i in range(11)] + [40], "." * 12),
    ("a spike smaller than 'rise' does not hold", JITTER, [40] * 7 + [55, 40, 40], ".........."),
    ("no baseline a window ago, no verdict", JITTER, [40, 80, 40], "..."),
    ("climb: a steady rise whose line reaches 100 % within 10 min, once a whole window is seen",
     CLIMB, [40 + 2 * i for i in range(10)], "...XXXXXXX"),
    ("climb: a level, however high, is not a climb", CLIMB, [97] * 8, "........"),
    ("climb: a slow rise that would take hours to fill does not hold", CLIMB, [40 + 0.1 * i for i in range(8)],
     "........"),
    ("climb: a rise smaller than 'rise' over the window does not hold", CLIMB, [96, 96.5, 97, 97.5, 98, 98.5],
     "......"),
    ("climb: one step that stays (an allocation) rises in one half of the window only",
     CLIMB, [1] * 5 + [75] * 8, "............."),
    ("climb: a steady climb must rise in both halves (2 points at 10 s, mid-window at t-20s)",
     CLIMB, [60] * 4 + [60 + 2 * i for i in range(1, 8)], "......XXXXX"),
    ("volatility: standard deviation >= 10 in both closed halves [t-30s, t-15s] and [t-15s, t]",
     VOLATILITY, [50, 50, 50, 80, 20, 50, 50, 50, 50], ".....X..."),
    ("volatility: swings that go on fill both halves", VOLATILITY, [50, 50] + [80, 20] * 5, "....XXXXXXXX"),
    ("volatility: one step that stays is not volatility, whatever its size", VOLATILITY, [1] * 5 + [75] * 8,
     "............."),
]


@pytest.mark.parametrize(("case", "cond", "values", "expected"), WINDOWED, ids=[c[0] for c in WINDOWED])
def test_windowed_memory_conditions(case: str, cond: str, values: list[float | None], expected: str) -> None:
    assert pattern(cond, mems(values)) == expected


FLAP = '{flapping: {metric: gpu.util, op: ">=", value: 50, window: 40s, high: 50, low: 25}}'


@pytest.mark.parametrize(("case", "values", "expected"), [
    ("one step in a full window is not flapping", [10, 10, 90, 90, 90, 90], "......"),
    ("alternating starts at 50 % changes and stops only under 25 %",
     [10, 90, 10, 90, 90, 90, 90, 90, 90], "....XXX.."),
    ("no verdict before a whole window of history", [10, 90, 10, 90], "...."),
])
def test_flapping_has_high_and_low_thresholds(case: str, values: list[float], expected: str) -> None:
    assert pattern(FLAP, utils(values)) == expected


THROTTLE = '{throttle: {reasons: [power_cap, hw_thermal], percent: 50, window: 30s}}'


@pytest.mark.parametrize(("case", "masks", "expected"), [
    ("power cap in half the window holds", [0, 0, 0, 0x4, 0x4, 0, 0, 0, 0], "....XXX.."),
    ("no verdict before a whole window of history", [0x4, 0x4, 0x4, 0x4], "...X"),
    ("idle (0x1) is not throttling", [0x1] * 5, "....."),
    ("reasons not listed do not count", [0x8] * 5, "....."),
    ("several reasons at once count once", [0x44] * 4 + [0], "...XX"),
    ("an unknown mask is skipped, not counted as unthrottled", [0x40] * 4 + [None, None, 0x40], "...X..X"),
])
def test_throttle_counts_listed_reasons_over_the_window(case: str, masks: list[int | None], expected: str) -> None:
    snaps = [snap(i * 10.0, [gpu(mask=m)]) for i, m in enumerate(masks)]
    assert pattern(THROTTLE, snaps) == expected


def test_stale_holds_for_sources_that_are_not_ok() -> None:
    def sources(*states: str) -> Snapshot:
        return snap(0, sources=[SourceStatus(n, s, age_s=12.0) for n, s in zip(("nvml", "dcgm"), states, strict=False)])

    ev = build(condition("{stale: {source: dcgm}}"))
    assert ev.evaluate(Frame(sources("ok", "stale"), 0)) == {("source", "dcgm"): 12.0}
    assert ev.evaluate(Frame(sources("error", "ok"), 0)) == {}
    any_source = build(condition("{stale: {}}"))
    assert set(any_source.evaluate(Frame(sources("error", "stale"), 0))) == {("source", "nvml"), ("source", "dcgm")}


def test_all_joins_gpu_conditions_per_gpu() -> None:
    cond = ('{all: [{threshold: {metric: gpu.mem_used_percent, op: ">=", value: 70}}, '
            '{threshold: {metric: gpu.util, op: "<", value: 30}}]}')
    s = snap(0, [gpu(0, util=10, mem=80), gpu(1, util=90, mem=80), gpu(2, util=10, mem=20)])
    result = build(condition(cond)).evaluate(Frame(s, 0))
    assert result == {("gpu", "GPU-0000"): pytest.approx(80.0)}  # the value is the first condition's


def test_all_joins_a_process_to_its_own_gpu() -> None:
    cond = ('{all: [{threshold: {metric: gpu.util, op: "<", value: 50}}, '
            '{threshold: {metric: process.top_thread_cpu_percent, op: ">=", value: 90}}]}')
    s = snap(0, [gpu(0, util=10), gpu(1, util=95)],
             [proc(100, 0), proc(200, 1), proc(300, 0, thread_cpu=20)])
    assert build(condition(cond)).evaluate(Frame(s, 0)) == {("process", "100", "0"): 99.0}


def test_any_is_the_union_with_the_first_holding_value() -> None:
    cond = ('{any: [{threshold: {metric: gpu.util, op: ">", value: 90}}, '
            '{threshold: {metric: gpu.temperature_c, op: ">", value: 80}}]}')
    s = snap(0, [gpu(0, util=95, temp=85), gpu(1, util=10, temp=85), gpu(2, util=10, temp=20)])
    assert build(condition(cond)).evaluate(Frame(s, 0)) == {("gpu", "GPU-0000"): 95.0, ("gpu", "GPU-0001"): 85.0}


def test_tensor_rule_cannot_hold_on_a_gpu_without_tensor_activity() -> None:
    cond = ('{all: [{threshold: {metric: gpu.tensor_active, op: "<", value: 5}}, '
            '{threshold: {metric: gpu.util, op: ">=", value: 60}}]}')
    s = snap(0, [gpu(0, util=99, tensor=0.2), gpu(1, util=99, tensor=None)])
    assert set(build(condition(cond)).evaluate(Frame(s, 0))) == {("gpu", "GPU-0000")}


def test_windows_forget_samples_older_than_the_window_after_a_gap() -> None:
    snaps = [snap(t, [gpu(mem=m)]) for t, m in ((0, 20), (10, 80), (20, 20), (30, 80), (1000, 50))]
    assert pattern(VOLATILITY, snaps) == "...X."


def test_windows_of_departed_entities_are_dropped() -> None:
    ev = build(condition('{volatility: {metric: process.top_thread_cpu_percent, stddev: 1, window: 30s}}'))
    for i in range(5):
        ev.evaluate(Frame(snap(i * 10.0, [gpu()], [proc(100 + i)]), i * 10.0))
    ev.evaluate(Frame(snap(1000, [gpu()], []), 1000.0))
    assert ev._windows == {}  # type: ignore[attr-defined]
