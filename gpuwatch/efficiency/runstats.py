"""One run's numbers, for comparing two runs: what the GPU did (GPU-Util, SM, tensor and DRAM activity),
its memory (peak and jitter), PCIe, the feeding process's CPU, the doctor's verdict, the alerts that fired,
and the workload's own throughput and latency where the recording's header carries them.

A recording carries the workload's numbers in its header's ``meta`` (``req_per_s``, ``p50_ms``, ``p99_ms``,
at the top or under ``"workload"``), as the reference workload's stage recordings do.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuwatch.alerts.backtest import run_backtest
from gpuwatch.alerts.loader import DEFAULT_RULES, load_rules
from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.model.snapshot import Snapshot

WORKLOAD_KEYS = ("req_per_s", "p50_ms", "p99_ms")
FULL_LOAD = "full"


@dataclass(frozen=True)
class RunStats:
    name: str
    seconds: float
    values: dict[str, float | None]
    top_finding: str
    alerts_fired: tuple[str, ...]
    #: Per-sample series for the chart: (seconds from the start, GPU-Util, SM activity).
    series: dict[str, list[float]] = field(default_factory=dict)
    #: Samples in the run, and those with at least one GPU that was not lost: a run without them is no run
    #: to judge (``gpuwatch compare`` refuses it rather than find "no regression" in nothing).
    samples: int = 0
    gpu_samples: int = 0
    #: The offered load, where the header says: req/s of an open-loop run, or FULL_LOAD (closed loop); None:
    #: not known (a live stream, a recording without the workload's numbers).
    offered: float | str | None = None

    @property
    def load_text(self) -> str:
        if self.offered is None:
            return "an unknown load"
        return "full load (closed loop)" if self.offered == FULL_LOAD else f"{self.offered:g} req/s offered"


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


def _workload(meta: dict[str, Any]) -> dict[str, float | None]:
    src = meta.get("workload") if isinstance(meta.get("workload"), dict) else meta
    out: dict[str, float | None] = {}
    for key in WORKLOAD_KEYS:
        value = src.get(key) if isinstance(src, dict) else None
        out[key] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return out


def _offered(meta: dict[str, Any]) -> float | str | None:
    """The offered load a recording's header names: a stage run's ``rate`` (None there: full load), or the
    workload's ``offered_rate`` ("closed loop": full load)."""
    workload = meta.get("workload")
    work: dict[str, Any] = workload if isinstance(workload, dict) else {}
    if "stage" in meta and "rate" in meta:
        rate = meta["rate"]
    elif "offered_rate" in work or "offered_rate" in meta:
        rate = work.get("offered_rate", meta.get("offered_rate"))
    else:
        return None
    if rate is None or rate == "closed loop" or rate == 0:
        return FULL_LOAD
    return float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None


def _feed_cpu(snap: Snapshot) -> float | None:
    """CPU of the process that feeds the GPU: the GPU process using the most CPU (percent of one core)."""
    cpus = [p.cpu_percent for p in snap.processes if p.cpu_percent is not None]
    return max(cpus) if cpus else None


def run_stats(name: str, snapshots: Sequence[Snapshot], meta: dict[str, Any] | None = None) -> RunStats:
    """``snapshots`` (one run) reduced to the rows ``gpuwatch compare`` shows."""
    gpus = [(s, g) for s in snapshots for g in s.gpus if not g.lost]
    used = [float(g.mem_used_bytes) for _, g in gpus if g.mem_used_bytes is not None]
    values: dict[str, float | None] = {
        "gpu_util": _mean([g.gpu_util for _, g in gpus]),
        "sm_active": _mean([g.sm_active for _, g in gpus]),
        "tensor_active": _mean([g.tensor_active for _, g in gpus]),
        "dram_active": _mean([g.dram_active for _, g in gpus]),
        "mem_peak_gib": max(used) / 2**30 if used else None,
        "mem_jitter_gib": statistics.pstdev(used) / 2**30 if len(used) > 1 else None,
        "pcie_rx_gb_s": _scaled(_mean([g.pcie_rx_rate for _, g in gpus]), 1e-9),
        "pcie_tx_gb_s": _scaled(_mean([g.pcie_tx_rate for _, g in gpus]), 1e-9),
        "feed_cpu_percent": _mean([_feed_cpu(s) for s in snapshots]),
        **_workload(meta or {}),
    }
    top = top_problem(diagnose(snapshots)) if snapshots else None
    fired = run_backtest(load_rules([DEFAULT_RULES]), snapshots).summaries.values() if snapshots else []
    t0 = snapshots[0].time if snapshots else 0.0
    series = {"t": [s.time - t0 for s in snapshots],
              "gpu_util": [_mean([g.gpu_util for g in s.gpus]) or 0.0 for s in snapshots],
              "sm_active": [_mean([g.sm_active for g in s.gpus]) or 0.0 for s in snapshots]}
    return RunStats(name, (snapshots[-1].time - t0) if snapshots else 0.0, values,
                    top.code if top is not None else "-", tuple(sorted({a.name for a in fired if a.fired})), series,
                    samples=len(snapshots), gpu_samples=sum(1 for s in snapshots if any(not g.lost for g in s.gpus)),
                    offered=_offered(meta or {}))


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor
