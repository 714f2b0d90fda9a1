"""The two views of one ``gpuwatch validate`` run, and how the offered loads are chosen.

* capacity: each stage closed loop at full load, the most requests per second it serves (naive repeated,
  because every ratio and the shared rate rest on it);
* traffic: each stage open loop under each traffic shape, in one process per stage (``shapes``): the same
  offered rate for every stage, so p99 compares like with like (a share of naive's capacity: naive can keep
  up), then a ladder of rising rates that sizes what the stage sustains.
* latency (runs made before the traffic view): each stage open loop at a shared rate and a high rate.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from gpuwatch.validate.runner import StageRun

#: The shared rate as a share of naive's capacity.
SHARED_SHARE = 0.8
#: Seconds a stage takes beyond what is sampled (start-up, warm-up, CUDA-graph capture, exit): estimates.
OVERHEAD_S = {"cuda": 15.0, "cpu": 6.0}


@dataclass
class Validation:
    """Everything one run measured: capacity runs per stage (several for naive) and latency runs per rate."""

    stages: list[str]
    capacity: dict[str, list[StageRun]] = field(default_factory=dict)
    rates: list[float] = field(default_factory=list)
    latency: dict[float, dict[str, StageRun]] = field(default_factory=dict)
    #: The traffic view: one phase-plan run per stage, covering every shape (empty in runs made before it).
    shapes: list[str] = field(default_factory=list)
    traffic: dict[str, StageRun] = field(default_factory=dict)
    shared_rate: float | None = None
    mix: dict[str, float] = field(default_factory=dict)

    def capacity_run(self, stage: str) -> StageRun | None:
        """The stage's capacity run; of repeats, the one with the median req/s."""
        runs = self.capacity.get(stage, [])
        if not runs:
            return None
        ok = sorted((r for r in runs if r.workload), key=lambda r: r.workload["req_per_s"])  # type: ignore[index]
        return ok[(len(ok) - 1) // 2] if ok else runs[0]

    def capacity_runs_req_per_s(self, stage: str) -> list[float]:
        return [float(r.workload["req_per_s"]) for r in self.capacity.get(stage, []) if r.workload]

    def latency_run(self, rate: float, stage: str) -> StageRun | None:
        return self.latency.get(rate, {}).get(stage)


def median_capacity(req_per_s: list[float]) -> float | None:
    return statistics.median(req_per_s) if req_per_s else None


def estimate_s(device: str, stages: int, repeats: int, capacity_s: float, phases: int, phase_s: float) -> float:
    """Seconds the whole run should take at most (ladders stop at their first failed rung): every run's
    sampled window plus its start-up; one traffic run per stage of ``phases`` phases."""
    capacity_runs = stages + max(0, repeats - 1)  # naive repeated
    return (capacity_runs * capacity_s + stages * phases * phase_s
            + (capacity_runs + stages) * OVERHEAD_S[device])


def spread(values: list[float]) -> dict[str, Any] | None:
    """Min, median and max of repeated measurements (None for fewer than two)."""
    if len(values) < 2:
        return None
    return {"min": round(min(values), 1), "median": round(statistics.median(values), 1),
            "max": round(max(values), 1), "runs": len(values)}
