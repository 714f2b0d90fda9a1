"""Timing statistics: medians and p90 of repeated calls, measured the same way for every candidate.

Candidates are called round-robin (one call of each per round) rather than one block after another, so a
clock ramp, a noisy neighbour or the GPU load changing over the run touches every candidate alike.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """Per-call wall time of one candidate, in milliseconds."""

    median_ms: float
    p90_ms: float
    min_ms: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        return {"median_ms": round(self.median_ms, 4), "p90_ms": round(self.p90_ms, 4),
                "min_ms": round(self.min_ms, 4), "n": self.n}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0-100): a value that was actually observed."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def summarize(samples_s: list[float]) -> Timing:
    ms = [s * 1000.0 for s in samples_s]
    return Timing(median_ms=statistics.median(ms), p90_ms=percentile(ms, 90), min_ms=min(ms), n=len(ms))


def time_calls(fn: Callable[[], object], n: int, warmup: int = 3) -> Timing:
    """``fn`` called ``warmup`` times unmeasured, then ``n`` times measured one by one."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return summarize(samples)


def interleaved(candidates: Mapping[str, tuple[Callable[[], object], int]], warmup: int = 3,
                min_round_s: float = 0.0) -> dict[str, Timing]:
    """Round-robin timing. ``candidates``: name -> (fn, n calls); rounds go on until every candidate has its
    n. A round lasts at least ``min_round_s`` (sleeping the rest), so a sampler's tick sees real time pass
    between calls as it would at its interval (GPM, for one, reuses its metrics within 100 ms)."""
    for fn, _ in candidates.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    while any(len(samples[name]) < n for name, (_, n) in candidates.items()):
        round_start = time.perf_counter()
        for name, (fn, n) in candidates.items():
            if len(samples[name]) >= n:
                continue
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
        rest = min_round_s - (time.perf_counter() - round_start)
        if rest > 0:
            time.sleep(rest)
    return {name: summarize(values) for name, values in samples.items()}


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` rounded, or None when either is missing or ``b`` is zero."""
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 4)
