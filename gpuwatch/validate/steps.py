"""Whether each stage beats the one before it: more capacity, and a p99 at the shared rate no worse. Where a
step does not help, the reason the measurements give (run-to-run noise, a rate it cannot sustain, or what the
doctor still finds), so the table never hides a step that does not pay."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwatch.validate.views import Validation

#: Two p99s closer than this (relative) are a tie: open-loop p99 over a few seconds moves that much run to run.
P99_NOISE = 0.10


@dataclass(frozen=True)
class Step:
    stage: str
    previous: str
    capacity_ratio: float | None
    p99_ms: float | None
    previous_p99_ms: float | None
    why: str | None  # None when the step helps on both counts

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
            reasons.append(_capacity_why(v, stage, prev, ratio))
        if v.rates and not step.p99_no_worse:
            reasons.append(_p99_why(v, stage, prev, wa, wb))
        out.append(Step(stage, prev, ratio, pb, pa, "; ".join(reasons) or None))
    return out


def _capacity_why(v: Validation, stage: str, prev: str, ratio: float | None) -> str:
    if ratio is None:
        return f"capacity not measured for {stage} or {prev}"
    run = v.capacity_run(stage)
    top = run.row()["top_finding"] if run else "-"
    return f"capacity {ratio:g}x {prev}'s: not faster; the doctor's top finding at full load: {top}"


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
