"""Shapes of a memory series over a window: a steady climb (a leak) and repeated rises and falls (churn).

A leak is judged on a least-squares fit over every sample, never on two points: one allocation burst
or a model load that then stops is not a climb. Churn counts swings larger than a chosen amplitude,
with hysteresis, so noise around a level is not counted.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from gpuwatch.doctor.window import Series


@dataclass(frozen=True)
class Fit:
    slope: float  # units per second
    r2: float
    rising_share: float  # share of steps that went up
    rise: float  # last fitted value minus first fitted value
    largest_fall: float  # the largest drop from one point to the next (0 when it never fell)

    def seconds_to(self, limit: float, now_value: float) -> float | None:
        """Seconds until the fitted line reaches ``limit``, or None when it does not climb."""
        return (limit - now_value) / self.slope if self.slope > 0 and limit > now_value else None


def linear_fit(series: Series) -> Fit | None:
    """Least squares over the points; None with fewer than 4 points or no time spread."""
    if len(series) < 4:
        return None
    ts = [t for t, _ in series]
    vs = [v for _, v in series]
    n = len(series)
    mt, mv = sum(ts) / n, sum(vs) / n
    stt = sum((t - mt) ** 2 for t in ts)
    if stt <= 0:
        return None
    slope = sum((t - mt) * (v - mv) for t, v in series) / stt
    svv = sum((v - mv) ** 2 for v in vs)
    sres = sum((v - (mv + slope * (t - mt))) ** 2 for t, v in series)
    r2 = 1.0 - sres / svv if svv > 0 else 0.0
    steps = [b - a for a, b in itertools.pairwise(vs)]
    return Fit(slope=slope, r2=r2, rising_share=sum(1 for d in steps if d > 0) / (n - 1),
               rise=slope * (ts[-1] - ts[0]), largest_fall=max(0.0, -min(steps)))


def swings(series: Series, amplitude: float) -> tuple[int, int]:
    """``(rises, falls)`` of at least ``amplitude``, each counted from the last turning point (a zigzag)."""
    values = [v for _, v in series]
    if not values or amplitude <= 0:
        return 0, 0
    rises = falls = direction = 0
    low = high = extreme = values[0]
    for v in values[1:]:
        if direction == 0:
            low, high = min(low, v), max(high, v)
            if v - low >= amplitude:
                direction, extreme, rises = 1, v, rises + 1
            elif high - v >= amplitude:
                direction, extreme, falls = -1, v, falls + 1
        elif direction > 0:
            if v > extreme:
                extreme = v
            elif extreme - v >= amplitude:
                direction, extreme, falls = -1, v, falls + 1
        elif v < extreme:
            extreme = v
        elif v - extreme >= amplitude:
            direction, extreme, rises = 1, v, rises + 1
    return rises, falls


def has_spike(series: Series, amplitude: float, within_s: float) -> bool:
    """A rise of ``amplitude`` or more that falls back by as much within ``within_s`` seconds of its start."""
    for i, (t0, v0) in enumerate(series):
        peak = v0
        for t, v in series[i + 1:]:
            if t - t0 > within_s:
                break
            peak = max(peak, v)
            if peak - v0 >= amplitude and peak - v >= amplitude:
                return True
    return False
