"""Two runs side by side, each row marked better, same or worse with a noise margin, and a verdict a CI
job can gate on: a regression is a row worse by more than its threshold (the noise margin unless the
user sets one).

Margins are what one run of the same load moves by: a few points of a percentage, 10 % of an open-loop
p99 (the reference workload's run-to-run noise), 5 % of a throughput. Rows without a direction (GPU-Util,
SM and DRAM activity, PCIe, the feeding process's CPU) are shown, never judged: at one load, a run that
needs more GPU time for the same work is not better, and at full load the throughput row already says
whether the busier GPU served more.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuwatch.efficiency.runstats import RunStats, run_stats
from gpuwatch.efficiency.stages import STEP_TARGETS
from gpuwatch.model.snapshot import Snapshot


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    #: +1: higher is better, -1: lower is better, 0: shown, not judged.
    direction: int
    #: Noise margin: absolute in the metric's unit, and relative (a share of the base value); the larger wins.
    margin_abs: float
    margin_rel: float = 0.0


METRICS: tuple[Metric, ...] = (
    Metric("gpu_util", "GPU-Util", "%", 0, 2.0),
    Metric("sm_active", "SM activity", "%", 0, 2.0),
    Metric("tensor_active", "tensor activity", "%", +1, 0.5, 0.10),
    Metric("dram_active", "DRAM activity", "%", 0, 2.0),
    Metric("mem_peak_gib", "memory peak", "GiB", -1, 0.25, 0.05),
    Metric("mem_jitter_gib", "memory jitter (std)", "GiB", -1, 0.1, 0.10),
    Metric("pcie_rx_gb_s", "PCIe host-to-device", "GB/s", 0, 0.1, 0.10),
    Metric("pcie_tx_gb_s", "PCIe device-to-host", "GB/s", 0, 0.1, 0.10),
    Metric("feed_cpu_percent", "feeding process CPU", "% of a core", 0, 5.0),
    Metric("req_per_s", "throughput", "req/s", +1, 0.0, 0.05),
    Metric("p50_ms", "p50 latency", "ms", -1, 0.5, 0.10),
    Metric("p99_ms", "p99 latency", "ms", -1, 1.0, 0.10),
)
BY_KEY = {m.key: m for m in METRICS}


@dataclass(frozen=True)
class Row:
    metric: Metric
    base: float | None
    new: float | None
    verdict: str  # better, same, worse, changed, other load (not comparable), "-" (not in both)
    #: The threshold used (in the metric's unit) and whether the row is a regression beyond it.
    threshold: float | None
    regression: bool


def margin(m: Metric, base: float, threshold: str | None = None) -> float:
    """The margin for ``base``: the metric's noise margin, or the user's threshold ("10%" relative to the
    base, or a number in the metric's unit)."""
    if threshold is not None:
        text = threshold.strip()
        return abs(base) * float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    return max(m.margin_abs, abs(base) * m.margin_rel)


def judge(m: Metric, base: float | None, new: float | None, threshold: str | None = None) -> Row:
    if base is None or new is None:
        return Row(m, base, new, "-", None, False)
    limit = margin(m, base, threshold)
    delta = new - base
    if abs(delta) <= limit:
        return Row(m, base, new, "same", limit, False)
    if m.direction == 0:
        return Row(m, base, new, "changed", limit, False)
    better = delta * m.direction > 0
    return Row(m, base, new, "better" if better else "worse", limit, not better)


#: Rows that follow the offered load: at two loads they move with the load, not with what changed.
LOAD_BOUND = frozenset({"gpu_util", "sm_active", "tensor_active", "dram_active", "pcie_rx_gb_s", "pcie_tx_gb_s",
                        "feed_cpu_percent", "req_per_s", "p50_ms", "p99_ms"})
#: Two open-loop rates closer than this share are one load (a rate is set, not measured).
SAME_LOAD_REL = 0.05


def load_mismatch(base: RunStats, new: RunStats) -> str | None:
    """Why the two runs were not at one offered load (both known and different), else None."""
    a, b = base.offered, new.offered
    if a is None or b is None or a == b:
        return None
    if isinstance(a, float) and isinstance(b, float) and abs(a - b) <= SAME_LOAD_REL * max(a, b):
        return None
    return f"BASE ran at {base.load_text}, NEW at {new.load_text}"


def compare(base: RunStats, new: RunStats, thresholds: Mapping[str, str] | None = None) -> list[Row]:
    """Every metric of :data:`METRICS`, base against new; ``thresholds`` by metric key override margins.
    At two different offered loads the rows that follow the load are shown, not judged ("other load")."""
    thresholds = thresholds or {}
    rows = [judge(m, base.values.get(m.key), new.values.get(m.key), thresholds.get(m.key)) for m in METRICS]
    if load_mismatch(base, new) is None:
        return rows
    return [Row(r.metric, r.base, r.new, "other load", None, False)
            if r.metric.key in LOAD_BOUND and r.verdict != "-" else r for r in rows]


def regressions(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.regression]


@dataclass(frozen=True)
class StepVerdict:
    """One step of a sequence of runs on its target metric (for "does every step help?")."""

    previous: str
    stage: str
    metric: str
    row: Row

    @property
    def helps(self) -> bool:
        return self.row.verdict == "better"


def step_table(runs: list[RunStats], targets: Mapping[str, str]) -> list[StepVerdict]:
    """Each run against the one before it on its target metric (``targets``: run name -> metric key;
    a run without one is judged on throughput). What ``gpuwatch validate`` can show as "does every step
    help?" from its stage recordings."""
    out = []
    for prev, run in itertools.pairwise(runs):
        key = targets.get(run.name, "req_per_s")
        m = BY_KEY[key]
        out.append(StepVerdict(prev.name, run.name, key, judge(m, prev.values.get(key), run.values.get(key))))
    return out


def stage_steps(runs: Sequence[tuple[str, Sequence[Snapshot], Mapping[str, Any]]],
                targets: Mapping[str, str] = STEP_TARGETS) -> list[StepVerdict]:
    """"Does every step help?" for stage runs given as (stage, snapshots, workload numbers), in order,
    all at one offered load: each stage against the one before on its target metric (STEP_TARGETS)."""
    return step_table([run_stats(name, list(snaps), {"workload": dict(workload)}) for name, snaps, workload in runs],
                      targets)


def step_text(step: StepVerdict) -> str:
    """One line for a step: its target metric before and after, and the verdict with its margin."""
    r = step.row
    if r.base is None or r.new is None:
        return f"{r.metric.label}: not measured for {step.previous} or {step.stage}"
    margin = f" (noise margin {r.threshold:.3g} {r.metric.unit})" if r.threshold is not None else ""
    return f"{r.metric.label} {r.base:.3g} -> {r.new:.3g} {r.metric.unit}: {r.verdict}{margin}"


#: The least a run must hold to be judged: samples with a GPU in them, and a share of the other run's length.
MIN_GPU_SAMPLES = 3
MIN_SHARE_OF_BASE = 0.25


def too_little(run: RunStats, base: RunStats | None = None) -> str | None:
    """Why ``run`` is no run to judge (against ``base``, when given), or None: no samples, no GPU in any
    sample, fewer than :data:`MIN_GPU_SAMPLES` samples with one, or shorter than a quarter of ``base``
    (by time or by samples). A CI gate must not pass on a run that measured nothing."""
    if run.samples == 0:
        return f"{run.name} holds no samples"
    if run.gpu_samples == 0:
        return f"{run.name} holds {run.samples} sample(s) and no GPU in any of them"
    if run.gpu_samples < MIN_GPU_SAMPLES:
        return f"{run.name} holds {run.gpu_samples} sample(s) with a GPU; at least {MIN_GPU_SAMPLES} are needed"
    if base is not None and base.gpu_samples:
        if run.gpu_samples < MIN_SHARE_OF_BASE * base.gpu_samples:
            return (f"{run.name} holds {run.gpu_samples} sample(s) with a GPU, under a quarter of BASE's "
                    f"{base.gpu_samples}")
        if base.seconds > 0 and run.seconds < MIN_SHARE_OF_BASE * base.seconds:
            return f"{run.name} covers {run.seconds:.0f} s, under a quarter of BASE's {base.seconds:.0f} s"
    return None
