"""Shapes of memory over time: what counts as a steady climb, a swing and a spike."""

from __future__ import annotations

from gpuwatch.doctor.trends import has_spike, linear_fit, swings

GIB = float(1 << 30)


def series(values: list[float], step: float = 1.0) -> tuple[tuple[float, float], ...]:
    return tuple((i * step, v) for i, v in enumerate(values))


def test_a_steady_climb_fits_a_line_with_its_slope() -> None:
    fit = linear_fit(series([10 * GIB + i * GIB for i in range(15)]))
    assert fit is not None
    assert abs(fit.slope - GIB) < 1e-3 * GIB and fit.r2 > 0.999 and fit.rising_share == 1.0
    assert abs(fit.rise - 14 * GIB) < 1e-3 * GIB
    assert abs((fit.seconds_to(100 * GIB, 24 * GIB) or 0) - 76.0) < 1e-6


def test_a_step_then_a_plateau_is_not_a_steady_climb() -> None:
    fit = linear_fit(series([1 * GIB] * 3 + [40 * GIB] * 12))
    assert fit is not None and (fit.r2 < 0.9 or fit.rising_share < 0.6)


def test_too_few_points_or_no_time_spread_give_no_fit() -> None:
    assert linear_fit(series([1.0, 2.0, 3.0])) is None
    assert linear_fit(((5.0, 1.0), (5.0, 2.0), (5.0, 3.0), (5.0, 4.0))) is None


def test_swings_count_moves_larger_than_the_amplitude_only() -> None:
    jitter = [0, 30, 30, 0, 0, 30, 0, 0, 30, 30, 0]
    assert swings(series([v * GIB for v in jitter]), 10 * GIB) == (3, 3)
    noise = [5, 6, 5, 7, 5, 6]
    assert swings(series([v * GIB for v in noise]), 10 * GIB) == (0, 0)
    assert swings((), GIB) == (0, 0)


def test_a_spike_must_come_back_down_within_the_time_given() -> None:
    quick = series([0, 30, 0, 0] + [0] * 10)
    slow = series([0] + [30] * 40 + [0])
    assert has_spike(tuple((t, v * GIB) for t, v in quick), 10 * GIB, 20.0)
    assert not has_spike(tuple((t, v * GIB) for t, v in slow), 10 * GIB, 20.0)
