"""The traffic view of a validate run: every stage under each traffic shape, from the phases of one process per
stage. Per shape and stage: p99 at the shared rate (the same offered load for every stage), the capacity (the
highest offered rate of a rising ladder sustained with p99 under the objective and under 1 % late, every lower
rung sustained too), and the planning rate (the highest sustained rung whose GPU-Util sits in the 70-85 %
band). Where a step does not help, the numbers say why, with the doctor's top finding for that stage."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from gpuwatch.validate.runner import StageRun
from gpuwatch.validate.steps import P99_NOISE

#: The planning band: a GPU run at 70-85 % utilisation keeps headroom for bursts and for a failed node.
BAND = (70.0, 85.0)
#: The ladder's rungs, as shares of the stage's closed-loop capacity (the shapes differ around it).
LADDER = (0.3, 0.5, 0.7, 0.85, 1.0, 1.2, 1.5)
#: The acceptance bar: p99 at the shared rate from the first stage to the last, under every shape.
TARGET_FALL = 10.0
#: Two p99s this close (ms) are a tie whatever their ratio: scheduling noise at a light load.
P99_FLOOR_MS = 2.0


def shared_phase(run: StageRun | None, shape: str) -> dict[str, Any] | None:
    for p in _phases(run):
        if p["shape"] == shape and p["group"].startswith("shared"):
            return p
    return None


def ladder(run: StageRun | None, shape: str) -> list[dict[str, Any]]:
    """The rungs that ran, by rate."""
    return sorted((p for p in _phases(run) if p["shape"] == shape and p["group"].startswith("ladder")),
                  key=lambda p: p["rate"])


def _phases(run: StageRun | None) -> list[dict[str, Any]]:
    return list((run.workload or {}).get("phases") or []) if run else []


@dataclass(frozen=True)
class Sizing:
    """What one stage sustains under one shape."""

    capacity: float | None  # None: not even the lowest rung
    top_rung: bool  # every rung passed: the capacity is at least this, not at most
    rung: dict[str, Any] | None  # the highest sustained rung
    planning: float | None
    band_note: str


def sizing(rungs: list[dict[str, Any]]) -> Sizing:
    best: dict[str, Any] | None = None
    for p in rungs:
        if not p.get("passed"):
            break
        best = p
    in_band = [p for p in rungs if p.get("passed") and p.get("gpu_util") is not None
               and BAND[0] <= p["gpu_util"] <= BAND[1] and (best is None or p["rate"] <= best["rate"])]
    planning = max((p["rate"] for p in in_band), default=None)
    sustained = [p for p in rungs if best is not None and p["rate"] <= best["rate"]]
    utils = [p["gpu_util"] for p in sustained if p.get("gpu_util") is not None]
    if planning is not None:
        at = next(p for p in in_band if p["rate"] == planning)
        sm = f" (SM activity {_g(at['sm_active'])}%)" if at.get("sm_active") is not None else ""
        note = f"GPU-Util {_g(at['gpu_util'])}%{sm} at {_g(planning)} req/s"
    elif not utils:
        note = "no GPU-Util measured" if sustained else "sustains no rung"
    elif max(utils) < BAND[0]:
        note = f"never reaches {BAND[0]:g}% GPU-Util while it meets the objective (at most {_g(max(utils))}%)"
    else:
        low = min(utils)
        note = (f"jumps past the band: {_g(low)}% at its lowest sustained rung" if low > BAND[1] else
                f"no rung landed in the band (GPU-Util {', '.join(_g(u) + '%' for u in utils)})")
    top = bool(rungs) and best is not None and best is rungs[-1]
    return Sizing(best["rate"] if best else None, top, best, planning, note)


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def capacity_cell(s: Sizing) -> str:
    if s.capacity is None:
        return "below the lowest rung"
    return f">= {s.capacity:g}" if s.top_rung else f"{s.capacity:g}"


@dataclass(frozen=True)
class ShapeStep:
    shape: str
    stage: str
    previous: str
    line: str
    helps: bool


def shape_steps(stages: list[str], runs: dict[str, StageRun], shape: str, rate: float | None) -> list[ShapeStep]:
    out = []
    for prev, stage in pairwise(stages):
        a, b = sizing(ladder(runs.get(prev), shape)), sizing(ladder(runs.get(stage), shape))
        pa, pb = shared_phase(runs.get(prev), shape), shared_phase(runs.get(stage), shape)
        reasons, good = [], []
        caps = f"capacity {capacity_cell(a)} -> {capacity_cell(b)} req/s"
        if b.capacity is not None and (a.capacity is None or b.capacity > a.capacity):
            good.append(caps + (f" ({prev} sustained its whole ladder: its capacity may be higher)"
                                if a.top_rung else ""))
        elif b.capacity is None and a.capacity is None:
            reasons.append("neither sustains its lowest rung")
        elif b.top_rung:
            reasons.append(f"{caps}: not settled ({stage} sustained its whole ladder, which ends below {prev}'s "
                           "capacity: a ladder from its closed-loop capacity that is too short)")
        else:
            top = (b.rung or {}).get("top_finding") or (pb or {}).get("top_finding") or "-"
            reasons.append(f"capacity {capacity_cell(a)} -> {capacity_cell(b)} req/s: no higher; the doctor's top "
                           f"finding for {stage} at its highest sustained rate: {top}")
        if pa and pb and pa.get("p99_ms") is not None and pb.get("p99_ms") is not None:
            x, y = pa["p99_ms"], pb["p99_ms"]
            head = f"p99 at {_g(rate)} req/s {p99_cell(pa)} -> {p99_cell(pb)} ms"
            if y <= x * (1 + P99_NOISE) or y - x < P99_FLOOR_MS:
                good.append(head + (" (a tie within the noise)" if y > x else ""))
            else:
                reasons.append(f"{head}: worse ({_g(pb.get('dropped_pct'))}% late, GPU-Util {_g(pb.get('gpu_util'))}"
                               f"%); the doctor's top finding at that rate: {pb.get('top_finding') or '-'}")
        else:
            reasons.append(f"p99 at {_g(rate)} req/s not measured for {prev} or {stage}")
        helps = not reasons
        line = "; ".join(good) if helps else "; ".join(reasons + good)
        out.append(ShapeStep(shape, stage, prev, ("helps: " if helps else "does not help: ") + line, helps))
    return out


def acceptance(stages: list[str], runs: dict[str, StageRun], shape: str, rate: float | None) -> str:
    """Whether p99 at the shared rate falls tenfold from the first stage to the last, and if not, why."""
    head, why = acceptance_parts(stages, runs, shape, rate)
    return f"{head}: {why}" if why else head


def acceptance_parts(stages: list[str], runs: dict[str, StageRun], shape: str,
                     rate: float | None) -> tuple[str, str]:
    """The headline (p99 first -> last stage and the fall) and, under the bar, why."""
    if len(stages) < 2:
        return "one stage only: nothing to compare", ""
    first, last = stages[0], stages[-1]
    a, b = shared_phase(runs.get(first), shape), shared_phase(runs.get(last), shape)
    if not a or not b or a.get("p99_ms") is None or b.get("p99_ms") is None:
        return f"p99 at {_g(rate)} req/s not measured for {first} or {last}", ""
    fall = a["p99_ms"] / b["p99_ms"] if b["p99_ms"] else float("inf")
    head = (f"p99 at {_g(rate)} req/s {p99_cell(a)} ms ({first}) -> {p99_cell(b)} ms ({last}): "
            f"{'>= ' if a.get('p99_is_lower_bound') else ''}{fall:.1f}x")
    if fall >= TARGET_FALL:
        return f"{head}, at least {TARGET_FALL:g}x", ""
    top = b.get("top_finding") or "-"
    if (b.get("dropped_pct") or 0) >= 1.0:
        cap = capacity_cell(sizing(ladder(runs.get(last), shape)))
        return f"{head}, under {TARGET_FALL:g}x", (
            f"{last} does not sustain {_g(rate)} req/s under {shape} traffic ({_g(b.get('dropped_pct'))}% late; it "
            f"sustains {cap} req/s); the doctor's top finding for {last} at this rate: {top}")
    return f"{head}, under {TARGET_FALL:g}x", (
        f"{first} answers at this rate within {p99_cell(a)} ms ({_g(a.get('dropped_pct'))}% late, GPU-Util "
        f"{_g(a.get('gpu_util'))}%), so a {TARGET_FALL:g}x fall would need {last} under "
        f"{a['p99_ms'] / TARGET_FALL:.3g} ms; {last}'s p50 is {_g(b.get('p50_ms'))} ms at GPU-Util "
        f"{_g(b.get('gpu_util'))}%: what is left is its own service time, not queueing; the doctor's top finding "
        f"for {last} at this rate: {top}")


def p99_cell(phase: dict[str, Any]) -> str:
    """A phase's p99, marked as a lower bound when over 1 % of its requests were never answered."""
    return ("-" if phase.get("p99_ms") is None else
            f"{'>= ' if phase.get('p99_is_lower_bound') else ''}{phase['p99_ms']:g}")
