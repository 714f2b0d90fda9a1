"""What ``gpuwatch report`` says, computed from hourly roll-ups: the funnel, lost GPU-hours by cause,
owner, GPU and hour, the fix for the biggest loss, and the capacity headroom.

Headroom follows the rule of thumb for inference services: SM activity between 70 and 85 % of the
allocated time is the healthy band; past 85 % queues (and p99 latency) grow fast, so add a replica or
split traffic. It is judged on a percentile of the window (the 90th of 10-second means, over allocated
time, as the GpuCapacityHeadroomLow alert does over 30 minutes), not on an instant.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, NamedTuple

from gpuwatch.efficiency.ledger import BIN_PCT
from gpuwatch.efficiency.rows import HistRow
from gpuwatch.efficiency.store import Rollup
from gpuwatch.model.causes import STATES

BAND = (70.0, 85.0)
PERCENTILE = 90.0
BREAKDOWNS = ("cause", "owner", "gpu", "hour")


class HourRow(NamedTuple):
    """One hour of the report: GPU-seconds allocated, effective and lost."""

    hour: int
    allocated: float = 0.0
    effective: float = 0.0
    lost: float = 0.0


@dataclass(frozen=True)
class Headroom:
    percentile: float
    sm_active: float
    verdict: str
    #: Allocated seconds the percentile stands on (the 10-second blocks of the roll-ups in the window).
    seconds: float = 0.0

    @property
    def line(self) -> str:
        return (f"Capacity headroom: SM activity p{self.percentile:.0f} {self.sm_active:.0f} % over "
                f"{_span(self.seconds)} of allocated time (healthy band {BAND[0]:.0f}-{BAND[1]:.0f} %): "
                f"{self.verdict}")


def _span(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class Summary:
    since: float
    until: float
    source: str
    #: GPU-seconds by state (observed, allocated, busy, effective) and lost.
    funnel: dict[str, float]
    #: Lost GPU-seconds by breakdown, biggest first: {"cause": [(key, seconds)], ...}.
    lost: dict[str, list[tuple[str, float]]]
    #: Per hour: allocated, effective and lost seconds.
    hours: list[HourRow]
    fixes: dict[str, tuple[str, str]]
    headroom: Headroom | None

    @property
    def efficiency(self) -> float | None:
        """Effective over allocated, percent (None: nothing allocated)."""
        alloc = self.funnel["allocated"]
        return None if alloc <= 0 else 100.0 * self.funnel["effective"] / alloc

    @property
    def top_fix(self) -> tuple[str, float, str] | None:
        """(cause, lost seconds, fix) of the biggest loss."""
        if not self.lost["cause"]:
            return None
        cause, seconds = self.lost["cause"][0]
        return cause, seconds, self.fixes.get(cause, ("", ""))[1]

    def to_dict(self) -> dict[str, Any]:
        top = self.top_fix
        return {"since": self.since, "until": self.until, "source": self.source,
                "gpu_hours": {k: v / 3600.0 for k, v in self.funnel.items()},
                "efficiency_percent": self.efficiency,
                "lost_gpu_hours": {by: [{by: k, "gpu_hours": v / 3600.0} for k, v in rows]
                                   for by, rows in self.lost.items()},
                "hours": [{"hour": r.hour, "allocated_gpu_hours": r.allocated / 3600.0,
                           "effective_gpu_hours": r.effective / 3600.0, "lost_gpu_hours": r.lost / 3600.0}
                          for r in self.hours],
                "top_fix": None if top is None else {"cause": top[0], "lost_gpu_hours": top[1] / 3600.0,
                                                     "fix": top[2]},
                "headroom": None if self.headroom is None else {
                    "percentile": self.headroom.percentile, "sm_active_percent": self.headroom.sm_active,
                    "band_percent": list(BAND), "verdict": self.headroom.verdict,
                    "allocated_seconds": self.headroom.seconds}}


def _sorted(d: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(((k, v) for k, v in d.items() if v > 0), key=lambda kv: (-kv[1], kv[0]))


def headroom(hist: list[HistRow], percentile: float = PERCENTILE, *, top_loss: str | None = None,
             efficiency: float | None = None) -> Headroom | None:
    """The ``percentile`` of SM activity over allocated time, read from the binned roll-ups (to the
    upper edge of its bin), and what the band says about it. Above the band only at its busiest while the
    window as a whole is under the band's floor (``efficiency``, effective over allocated) and a cause
    (``top_loss``) loses the most, the advice is that cause's fix, not a replica: more GPUs do not help
    GPUs that wait, and the report must not say both."""
    bins: dict[int, float] = defaultdict(float)
    for row in hist:
        bins[row.key.bin] += row.seconds
    total = sum(bins.values())
    if total <= 0:
        return None
    running = 0.0
    value = 100.0
    for b in sorted(bins):
        running += bins[b]
        if running >= total * percentile / 100.0:
            value = min(100.0, (b + 1) * BIN_PCT)
            break
    if value > BAND[1] and top_loss and efficiency is not None and efficiency < BAND[0]:
        verdict = (f"above the band only at its busiest; over the whole window the GPU is {efficiency:.1f} % "
                   f"efficient and loses most to {top_loss}: fix that first (a replica does not fix it), "
                   f"then judge the headroom again")
    elif value > BAND[1]:
        verdict = "above the band: add a replica or split traffic before p99 latency grows"
    elif value >= BAND[0]:
        verdict = "in the healthy band"
    else:
        verdict = "below the band: room for more load (or a loss above to fix first)"
    return Headroom(percentile, value, verdict, total)


def summarise(rollup: Rollup, since: float, until: float, source: str) -> Summary:
    """The report over ``rollup``; ``since`` moves up to the first hour with data (a short history)."""
    if rollup.seconds:
        since = max(since, min(float(r.key.hour) for r in rollup.seconds))
    funnel = dict.fromkeys(STATES, 0.0)
    by_hour: dict[int, HourRow] = {}
    for row in rollup.seconds:
        for state, v in row.states._asdict().items():
            funnel[state] += v
        h = by_hour.get(row.key.hour, HourRow(row.key.hour))
        by_hour[row.key.hour] = h._replace(allocated=h.allocated + row.states.allocated,
                                           effective=h.effective + row.states.effective)
    lost: dict[str, dict[str, float]] = {by: defaultdict(float) for by in BREAKDOWNS}
    for k, seconds in rollup.lost:
        lost["cause"][k.cause] += seconds
        lost["owner"][k.owner.text] += seconds
        lost["gpu"][str(k.gpu)] += seconds
        lost["hour"][str(k.hour)] += seconds
        h = by_hour.get(k.hour, HourRow(k.hour))
        by_hour[k.hour] = h._replace(lost=h.lost + seconds)
    funnel["lost"] = sum(lost["cause"].values())
    ranked = {by: _sorted(d) for by, d in lost.items()}
    ranked["hour"] = sorted(ranked["hour"], key=lambda kv: kv[0])
    hours = [by_hour[h] for h in sorted(by_hour)]
    allocated = funnel["allocated"]
    efficiency = None if allocated <= 0 else 100.0 * funnel["effective"] / allocated
    top = ranked["cause"][0][0] if ranked["cause"] else None
    return Summary(since, until, source, funnel, ranked, hours, rollup.fixes,
                   headroom(rollup.hist, top_loss=top, efficiency=efficiency))
