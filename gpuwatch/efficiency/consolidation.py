"""Consolidation advice from the roll-ups: owners whose GPUs sit under-used for most of their allocated
time, the MIG profile their peaks fit, the pairs that could share one GPU by MPS, and the GPU-hours a week
each would free.

Peaks, not means, decide whether a workload fits: a slice or a shared GPU must hold the busiest 10 seconds
of the window (SM activity) and the most memory ever in use, with headroom (:data:`SM_CEILING`,
:data:`MEM_HEADROOM`). Advice needs a working week's pattern: nothing is advised on less than
:data:`NEED_S` of roll-ups, nor for an owner with less than :data:`OWNER_MIN_S` allocated; below that the
answer says what it has and what it needs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from gpuwatch.efficiency.mig_profiles import GIB, MigProfile, family_of
from gpuwatch.efficiency.rows import NO_OWNER, OTHER_OWNER, UNDERUSED_PCT, Owner, OwnerUse
from gpuwatch.efficiency.store import Rollup
from gpuwatch.efficiency.summary import BAND

DAY = 86400.0
WEEK = 7 * DAY
#: Roll-ups needed before anything is advised: three days, so a weekday's peak hours are in the window
#: (one quiet night or a weekend alone would advise sharing GPUs that are busy on Monday).
NEED_S = 3 * DAY
#: An owner is judged once it held GPUs for a working day; a short job's peaks say little.
OWNER_MIN_S = 8 * 3600.0
#: "Most of its allocated time": the share of it in under-used 10-second blocks.
MOSTLY = 0.5
#: A slice or a shared GPU must keep the owners' peak SM activity within the healthy band's top (past it,
#: queues and p99 latency grow fast)...
SM_CEILING = BAND[1]
#: ...and their peak memory within 90 % of its memory (the CUDA context, fragmentation, a longer input).
MEM_HEADROOM = 0.9


@dataclass(frozen=True)
class OwnerLoad:
    """One owner over the window: GPU-seconds allocated and under-used, and its peaks."""

    owner: str
    use: OwnerUse

    @property
    def underused_share(self) -> float:
        return self.use.underused / self.use.allocated if self.use.allocated > 0 else 0.0

    def to_dict(self, have_s: float) -> dict[str, Any]:
        return {"owner": self.owner, "allocated_gpu_hours": self.use.allocated / 3600.0,
                "allocated_gpu_hours_per_week": _per_week(self.use.allocated, have_s),
                "underused_share": self.underused_share, "peak_sm_percent": self.use.peak_sm,
                "peak_memory_gib": self.use.peak_mem / GIB, "gpu_memory_gib": self.use.mem_total / GIB}


@dataclass(frozen=True)
class Advice:
    """``mig``: one owner fits ``profile``; ``mps``: two owners fit one GPU together."""

    kind: str
    owners: tuple[str, ...]
    freed_per_week_s: float
    peak_sm: float
    peak_mem: float
    profile: str = ""
    gpu: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "owners": list(self.owners),
                               "freed_gpu_hours_per_week": self.freed_per_week_s / 3600.0,
                               "peak_sm_percent": self.peak_sm, "peak_memory_gib": self.peak_mem / GIB}
        if self.kind == "mig":
            out.update(profile=self.profile, gpu=self.gpu)
        return out

    @property
    def line(self) -> str:
        freed = f"frees {self.freed_per_week_s / 3600:.1f} GPU-h a week"
        if self.kind == "mig":
            return (f"{self.owners[0]} fits MIG {self.profile} ({self.gpu}; peaks SM {self.peak_sm:.0f} %, "
                    f"memory {self.peak_mem / GIB:.1f} GiB): {freed}")
        return (f"{' + '.join(self.owners)} can share one GPU by MPS (peaks together SM {self.peak_sm:.0f} %, "
                f"memory {self.peak_mem / GIB:.1f} GiB): {freed}")


@dataclass(frozen=True)
class Consolidation:
    #: ``advice`` (enough data; the list may be empty) or ``not_enough_data``.
    status: str
    have_s: float
    need_s: float
    days: int
    underused: list[OwnerLoad] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)
    #: Owners with too little allocated time to be judged.
    unjudged: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "have_s": self.have_s, "need_s": self.need_s, "days": self.days,
                "owner_min_s": OWNER_MIN_S, "underused_below_sm_percent": UNDERUSED_PCT,
                "sm_ceiling_percent": SM_CEILING, "memory_headroom": MEM_HEADROOM,
                "underused_owners": [o.to_dict(self.have_s) for o in self.underused],
                "advice": [a.to_dict() for a in self.advice], "unjudged_owners": self.unjudged}

    def lines(self) -> list[str]:
        """The report's section: a headline, then one line per under-used owner and per piece of advice."""
        have = f"{self.have_s / 3600:.1f} h of roll-ups over {self.days} day{'s' * (self.days != 1)}"
        if self.status == "not_enough_data":
            return [f"Consolidation: not enough data: have {have}, need {self.need_s / 3600:.0f} h "
                    f"(owners need {OWNER_MIN_S / 3600:.0f} h allocated each); nothing is advised on less"]
        out = [f"Consolidation, from {have} (under-used: SM activity under {UNDERUSED_PCT:.0f} % for most of "
               f"the allocated time):"]
        if not self.underused:
            out.append("  no owner's GPUs sit under-used for most of their allocated time")
        for o in self.underused:
            out.append(f"  {o.owner}: under-used {100 * o.underused_share:.0f} % of "
                       f"{_per_week(o.use.allocated, self.have_s):.1f} GPU-h a week; peaks SM {o.use.peak_sm:.0f} %, "
                       f"memory {o.use.peak_mem / GIB:.1f} of {o.use.mem_total / GIB:.1f} GiB")
        if self.underused and not self.advice:
            out.append("  none of them fits a MIG profile or shares a GPU within the headroom")
        out += [f"  - {a.line}" for a in self.advice]
        if self.unjudged:
            out.append(f"  ({self.unjudged} owner{'s' * (self.unjudged != 1)} with under "
                       f"{OWNER_MIN_S / 3600:.0f} h allocated not judged)")
        return out


def _per_week(seconds: float, have_s: float) -> float:
    return seconds * WEEK / have_s / 3600.0 if have_s > 0 else 0.0


def coverage(rollup: Rollup) -> tuple[float, int]:
    """Seconds of watched time the owner roll-ups cover (per hour, the most any GPU observed) and the
    number of UTC days they fall on."""
    hours = {r.key.hour for r in rollup.owners}
    observed: dict[int, float] = defaultdict(float)
    for r in rollup.seconds:
        if r.key.hour in hours:
            observed[r.key.hour] = max(observed[r.key.hour], r.states.observed)
    return sum(observed.values()), len({int(h // DAY) for h in hours})


def loads(rollup: Rollup) -> list[OwnerLoad]:
    """Each named owner's use over the window, biggest allocation first."""
    by: dict[Owner, OwnerUse] = {}
    for r in rollup.owners:
        if r.key.owner not in (NO_OWNER, OTHER_OWNER):
            by[r.key.owner] = by.get(r.key.owner, OwnerUse()).plus(r.use)
    return sorted((OwnerLoad(o.text, u) for o, u in by.items()), key=lambda x: (-x.use.allocated, x.owner))


def fits(use: OwnerUse, profile: MigProfile) -> bool:
    """Whether the owner's peaks fit ``profile``: its SM peak scaled to the slice's SMs under the ceiling,
    its memory peak within the headroom of the slice's memory."""
    return (use.peak_sm <= SM_CEILING * profile.sm_fraction
            and use.peak_mem <= MEM_HEADROOM * profile.mem_fraction * use.mem_total)


def _mig(load: OwnerLoad, have_s: float) -> Advice | None:
    family = family_of(load.use.mem_total)
    if family is None:
        return None
    profile = next((p for p in family.profiles[:-1] if fits(load.use, p)), None)
    if profile is None:
        return None
    freed = load.use.allocated * (1 - profile.gpu_fraction) * WEEK / have_s
    return Advice("mig", (load.owner,), freed, load.use.peak_sm, load.use.peak_mem, profile.name, family.gpu)


def _mps(candidates: list[OwnerLoad], have_s: float) -> list[Advice]:
    """Greedy pairs, biggest allocation first, each with the partner that frees the most: two owners share
    a GPU when their peaks together stay under the ceilings of the smaller GPU; the GPU-hours of the
    smaller allocation are freed."""
    out: list[Advice] = []
    taken: set[str] = set()
    for a in candidates:
        if a.owner in taken:
            continue
        best: tuple[float, OwnerLoad] | None = None
        for b in candidates:
            if b.owner == a.owner or b.owner in taken:
                continue
            mem = min(a.use.mem_total, b.use.mem_total)
            if a.use.peak_sm + b.use.peak_sm > SM_CEILING or a.use.peak_mem + b.use.peak_mem > MEM_HEADROOM * mem:
                continue
            freed = min(a.use.allocated, b.use.allocated)
            if best is None or freed > best[0]:
                best = (freed, b)
        if best is not None:
            b = best[1]
            taken |= {a.owner, b.owner}
            out.append(Advice("mps", (a.owner, b.owner), best[0] * WEEK / have_s, a.use.peak_sm + b.use.peak_sm,
                              a.use.peak_mem + b.use.peak_mem))
    return out


def consolidate(rollup: Rollup) -> Consolidation:
    """The advice over ``rollup`` (the report's window), or what is missing before there can be any."""
    have_s, days = coverage(rollup)
    if have_s < NEED_S:
        return Consolidation("not_enough_data", have_s, NEED_S, days)
    judged = [o for o in loads(rollup) if o.use.allocated >= OWNER_MIN_S]
    unjudged = len(loads(rollup)) - len(judged)
    under = [o for o in judged if o.underused_share > MOSTLY]
    advice = [a for a in (_mig(o, have_s) for o in under) if a is not None]
    advice.sort(key=lambda a: (-a.freed_per_week_s, a.owners))
    return Consolidation("advice", have_s, NEED_S, days, under, advice + _mps(under, have_s), unjudged)
