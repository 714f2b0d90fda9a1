"""When requests arrive, per traffic shape, on a schedule that never depends on how fast the server is.

* steady and longtail: a Poisson process at the mean rate (longtail differs in what arrives: mostly short
  documents, a few very long ones);
* bursty: the same mean rate, all of it inside the on-phases (200 ms on, 200 ms off): a Poisson process at
  twice the rate in "on-time", laid onto the wall clock on-phase after on-phase, so no request is ever
  scheduled in an off-phase;
* mixed: the three superposed, each at its weight's share of the rate (a production mix of clients).

An arrival is stamped with its scheduled time, not the time the generator gets round to it: a server (or a
preprocessing step) that falls behind makes requests wait, and their latency counts the wait.
No torch here: worker processes import this module.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Mapping

BURST_PERIOD_S = 0.4
BURST_ON_S = 0.2
#: The base shapes, and the mixed one made of them.
BASE_SHAPES = ("steady", "longtail", "bursty")
SHAPES = (*BASE_SHAPES, "mixed")
#: The mix validate sizes capacity from unless told otherwise: mostly steady clients, a quarter long documents,
#: a quarter bursts.
DEFAULT_MIX: dict[str, float] = {"steady": 0.5, "longtail": 0.25, "bursty": 0.25}


def in_burst(t: float, start: float) -> bool:
    """Whether ``t`` falls in an on-phase of bursty traffic whose first burst begins at ``start``."""
    return (t - start) % BURST_PERIOD_S < BURST_ON_S


class BaseArrivals:
    """Arrival times of one base shape at mean ``rate`` per second, from ``start`` (seconds, any clock)."""

    def __init__(self, shape: str, rate: float, start: float, rng: random.Random) -> None:
        if shape not in BASE_SHAPES:
            raise ValueError(f"unknown traffic shape {shape!r}; choose from {', '.join(BASE_SHAPES)}")
        if rate <= 0:
            raise ValueError(f"an arrival rate must be positive, got {rate:g}")
        self.shape = shape
        self.start = start
        self.rng = rng
        self.bursty = shape == "bursty"
        # bursty: the whole mean rate squeezed into the on-phases
        self.rate = rate * (BURST_PERIOD_S / BURST_ON_S if self.bursty else 1.0)
        self.clock = 0.0  # seconds since start, in on-time for bursty traffic

    def next(self) -> float:
        self.clock += self.rng.expovariate(self.rate)
        if not self.bursty:
            return self.start + self.clock
        bursts, into = divmod(self.clock, BURST_ON_S)
        return self.start + bursts * BURST_PERIOD_S + into


class Arrivals:
    """The merged arrivals of a shape (``mixed``: of every weighted base shape): ``next()`` gives the next
    arrival time and the base shape it belongs to (which says what kind of document it carries)."""

    def __init__(self, shape: str, rate: float, start: float, seed: int,
                 mix: Mapping[str, float] | None = None) -> None:
        weights = dict(mix or DEFAULT_MIX) if shape == "mixed" else {shape: 1.0}
        total = sum(weights.values())
        if total <= 0:
            raise ValueError("the traffic mix needs at least one positive weight")
        self.streams = [BaseArrivals(s, rate * w / total, start, random.Random(seed * 31 + i))
                        for i, (s, w) in enumerate(sorted(weights.items())) if w > 0]
        self.heap = [(s.next(), i) for i, s in enumerate(self.streams)]
        heapq.heapify(self.heap)

    def peek(self) -> float:
        return self.heap[0][0]

    def next(self) -> tuple[float, str]:
        t, i = self.heap[0]
        heapq.heapreplace(self.heap, (self.streams[i].next(), i))
        return t, self.streams[i].shape


def parse_mix(text: str) -> dict[str, float]:
    """``steady=0.5,longtail=0.25,bursty=0.25`` -> weights; raises ValueError saying what is wrong."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        if not sep or name.strip() not in BASE_SHAPES:
            raise ValueError(f"{part!r}: write SHAPE=WEIGHT with SHAPE one of {', '.join(BASE_SHAPES)}")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"{part!r}: the weight must be a number") from None
        if weight < 0:
            raise ValueError(f"{part!r}: a weight cannot be negative")
        out[name.strip()] = weight
    if not out or sum(out.values()) <= 0:
        raise ValueError("give at least one positive weight, e.g. steady=0.5,longtail=0.25,bursty=0.25")
    return out
