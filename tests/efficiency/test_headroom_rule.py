"""The capacity-headroom alert: the shipped GpuCapacityHeadroomLow fires when the 90th percentile of 30
minutes of SM activity is over 85 % (not on a burst), and a threshold's ``quantile`` is checked on load."""

from __future__ import annotations

import pytest
from alerts.build import rule_yaml, snap

from gpuwatch.alerts import AlertEngine
from gpuwatch.alerts.loader import DEFAULT_RULES, load_rules, parse_rules
from gpuwatch.alerts.rules import RuleError
from gpuwatch.alerts.windows import quantile
from gpuwatch.model.snapshot import GpuSample, Profiling


def _sm(t: float, sm: float) -> GpuSample:
    return GpuSample(index=0, uuid="GPU-6c1e", name="NVIDIA H200", gpu_util=100.0,
                     profiling={"gpm": Profiling(sm_active=sm)})


def _firing_at(trace: list[float], step: float = 10.0) -> float | None:
    engine = AlertEngine(load_rules([DEFAULT_RULES]))
    for i, sm in enumerate(trace):
        engine.evaluate(snap(i * step, [_sm(i * step, sm)]))
        if any(a.name == "GpuCapacityHeadroomLow" and a.state == "firing" for a in engine.alerts()):
            return i * step
    return None


def test_sustained_sm_activity_over_the_band_fires_after_the_window_fills_and_for_elapses() -> None:
    at = _firing_at([90.0] * 300)  # 50 minutes at 90 %
    assert at is not None and 600 <= at <= 30 * 60 + 600


def test_the_healthy_band_and_short_bursts_do_not_fire() -> None:
    assert _firing_at([80.0] * 300) is None
    burst = ([78.0] * 17 + [99.0]) * 17  # one sample in 18 at 99 %: 5.6 % of the time, under the p90
    assert _firing_at(burst) is None


def test_quantile_matches_prometheus_linear_interpolation() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([10.0, 20.0, 30.0, 40.0, 50.0], 0.9) == pytest.approx(46.0)
    assert quantile([7.0], 0.9) == 7.0


@pytest.mark.parametrize(("condition", "message"), [
    ('{threshold: {metric: gpu.sm_active, op: ">", value: 85, quantile: 0.9}}', "'quantile' needs 'avg'"),
    ('{threshold: {metric: gpu.sm_active, op: ">", value: 85, avg: 5m, quantile: 1.5}}', "between 0 and 1"),
])
def test_a_bad_quantile_is_refused_with_what_to_write(condition: str, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        parse_rules(rule_yaml(condition))
