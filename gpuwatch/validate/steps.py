"""Whether each stage beats the one before it: more capacity, and a p99 at the shared rate no worse. Where a
step does not help, the reason the measurements give (run-to-run noise, a rate it cannot sustain, or what the
doctor still finds), so the table never hides a step that does not pay."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwatch.validate.views import Validation

#: Two p99s closer than this (relative) are a tie: open-loop p99 over a few seconds moves that much run to run.
P99_NOISE = 0.10
#: SM activity (percent) at which a stage's GPU counts as saturated: a step can then only gain by doing less
#: GPU work (fewer or cheaper operations), not by feeding the GPU faster.
SATURATED_SM = 90.0


@dataclass(frozen=True)
class Step:
    stage: str
    previous: str
    capacity_ratio: float | None
    p99_ms: float | None
    previous_p99_ms: float | None
    why: str | None  # None when the step helps on both counts
    #: Said beside a step that helps: its p99 at the shared rate tied with the previous stage's.
    tie: str | None = None

    @property
    def faster(self) -> bool:
        return self.capacity_ratio is not None and self.capacity_ratio > 1.0

    @property
    def p99_no_worse(self) -> bool:
        return self.p99_ms is not None and self.previous_p99_ms is not None and \
            self.p99_ms <= self.previous_p99_ms * (1 + P99_NOISE)


def _req_per_s(v: Validation, stage: str) -> float | None:
    run = v.capacity_run(stage)
    return float(run.workload["req_per_s"]) if run and run.workload else None


def _at_rate(v: Validation, stage: str) -> dict[str, Any] | None:
    run = v.latency_run(v.rates[0], stage) if v.rates else None
    return run.workload if run else None


def steps(v: Validation) -> list[Step]:
    out: list[Step] = []
    for prev, stage in zip(v.stages, v.stages[1:], strict=False):
        a, b = _req_per_s(v, prev), _req_per_s(v, stage)
        ratio = round(b / a, 2) if a and b else None
        wa, wb = _at_rate(v, prev), _at_rate(v, stage)
        pa = wa.get("p99_ms") if wa else None
        pb = wb.get("p99_ms") if wb else None
        step = Step(stage, prev, ratio, pb, pa, None)
        reasons = []
        if not step.faster:
            why = _capacity_why(v, stage, prev, ratio)
            if pa is not None and pb is not None and pb < pa:
                why += f"; it does answer sooner: p99 at {v.rates[0]:g} req/s {pb:g} ms against {pa:g} ms"
            reasons.append(why)
        if v.rates and not step.p99_no_worse:
            reasons.append(_p99_why(v, stage, prev, wa, wb))
        tie = None
        if pa is not None and pb is not None and pb > pa and step.p99_no_worse:
            tie = (f"p99 at {v.rates[0]:g} req/s {pb:g} ms against {prev}'s {pa:g} ms: a tie (within "
                   f"{P99_NOISE:.0%}, the run-to-run noise of an open-loop p99)")
        out.append(Step(stage, prev, ratio, pb, pa, "; ".join(reasons) or None, tie))
    return out


def step_line(step: Step) -> str:
    """The line "Does every step help?" gives for ``step``."""
    if step.why:
        return step.why
    return "faster, and " + (step.tie or "p99 at the shared rate no worse")


def _capacity_why(v: Validation, stage: str, prev: str, ratio: float | None) -> str:
    if ratio is None:
        return f"capacity not measured for {stage} or {prev}"
    run, before = v.capacity_run(stage), v.capacity_run(prev)
    top = run.row()["top_finding"] if run else "-"
    busy = before.row()["sm_active"] if before else None
    why = f"capacity {ratio:g}x {prev}'s: not faster"
    if busy is not None and busy >= SATURATED_SM:
        why += (f": the GPU was already saturated under {prev} (SM activity {busy:g}% at full load), so work "
                "that only shortens the CPU's side adds no capacity")
    return f"{why}; the doctor's top finding at full load: {top}"


def _p99_why(v: Validation, stage: str, prev: str, wa: dict[str, Any] | None, wb: dict[str, Any] | None) -> str:
    rate = v.rates[0]
    if not wa or not wb or wa.get("p99_ms") is None or wb.get("p99_ms") is None:
        return f"p99 at {rate:g} req/s not measured for {stage} or {prev}"
    pa, pb = wa["p99_ms"], wb["p99_ms"]
    head = f"p99 at {rate:g} req/s {pb:g} ms against {prev}'s {pa:g} ms"
    if (wb.get("dropped_pct") or 0) > (wa.get("dropped_pct") or 0) + 1:
        return f"{head}: it cannot sustain the rate ({wb.get('req_per_s')} req/s served, " \
               f"{wb.get('dropped_pct')}% dropped or late)"
    if pb - pa < 2.0:
        return f"{head}: within 2 ms, the size of scheduling noise at this load"
    run = v.latency_run(rate, stage)
    top = run.row()["top_finding"] if run else "-"
    return f"{head}: worse (mean batch {wb.get('mean_batch')}); the doctor's top finding at this rate: {top}"
