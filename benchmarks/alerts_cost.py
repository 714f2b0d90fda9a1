"""Alert evaluation once the rules' windows are full: the steady-state cost a 60 s daemon window misses.

The shipped rules look back up to 10 minutes (jitter, volatility, flapping, throttle), so a daemon
measured for a minute after start evaluates windows that are still filling. Here the shipped rules run
in-process over a replayed 1 GPU x 4 process recording stamped at 1 s and at 0.1 s spacing until every
window is full, then the next snapshots are timed one by one.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from benchmarks.stats import summarize
from gpuwatch.alerts import DEFAULT_RULES, AlertEngine, load_rules
from gpuwatch.model.recording import load

FILL_S = 660.0  # the longest shipped window (10 min) and a margin
TIMED = 200


def steady_state(recording: Path, step_s: float) -> dict[str, Any]:
    base = load(recording)
    engine = AlertEngine(load_rules([Path(DEFAULT_RULES)]))
    t0 = base[0].time
    fill = int(FILL_S / step_s)
    samples = []
    for i in range(fill + TIMED):
        snap = dataclasses.replace(base[i % len(base)], time=t0 + i * step_s)
        start = time.perf_counter()
        engine.evaluate(snap)
        if i >= fill:
            samples.append(time.perf_counter() - start)
    t = summarize(samples)
    mean_ms = 1000.0 * sum(samples) / len(samples)
    return {**t.to_dict(), "mean_ms": round(mean_ms, 4), "cpu_pct": round(mean_ms / (10.0 * step_s), 3)}


def bench_alert_windows(recording: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, step in (("1s", 1.0), ("100ms", 0.1)):
        res = steady_state(recording, step)
        out[f"alerts_eval_ms_{label}"] = res["median_ms"]
        out[f"alerts_cpu_pct_{label}"] = res["cpu_pct"]
        out[f"alerts_steady_{label}"] = res
    out["alerts_how"] = ("shipped rules, 1 GPU x 4 processes, windows full (660 s of snapshots), "
                         f"{TIMED} snapshots timed; cpu_pct = mean evaluation time / interval")
    return out
