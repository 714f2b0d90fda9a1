"""One workload process, several measured phases: a traffic shape at an offered rate each, run back to back so
the model is built and its CUDA graphs captured once for the whole sweep (a process per phase would spend more
time starting than measuring).

The serving loop moves the phases on (:class:`PhaseBook`); the load generators follow the phase now running
through a shared :class:`Control` (:class:`Schedule`). A phase counts the requests that arrive between
``settle_s`` after its start and ``tail_s`` before its end, so what the previous phase left in the queues
never counts, and a counted request still unanswered at the end has waited at least ``tail_s`` (over the
objective): it is late. A phase that fails its objective ends its group (a rate ladder): higher rates of the
same ladder would fail too, and the time goes to the next one.
No torch here: worker processes import this module.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, MutableSequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuwatch.workload.arrivals import SHAPES, Arrivals
from gpuwatch.workload.config import percentile

WARMUP, DONE = -1, -2
#: A phase passes when at most this share (percent) of its requests is late, shed or never answered.
MAX_LATE_PCT = 1.0


@dataclass(frozen=True)
class Phase:
    shape: str
    rate: float
    seconds: float
    #: Phases of one group form a ladder of rising rates: the first that fails ends it.
    group: str = ""


@dataclass(frozen=True)
class Plan:
    phases: tuple[Phase, ...]
    mix: dict[str, float] = field(default_factory=dict)
    settle_s: float = 0.3
    tail_s: float = 0.25

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "phases": [asdict(p) for p in self.phases]}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """The plan ``to_json`` wrote; ValueError saying what is wrong otherwise."""
        try:
            data = json.loads(text)
            phases = tuple(Phase(str(p["shape"]), float(p["rate"]), float(p["seconds"]), str(p.get("group", "")))
                           for p in data["phases"])
            plan = cls(phases, {str(k): float(v) for k, v in data.get("mix", {}).items()},
                       float(data.get("settle_s", 0.3)), float(data.get("tail_s", 0.25)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a phase plan ({type(exc).__name__}: {exc})") from None
        for p in plan.phases:
            if p.shape not in SHAPES or p.rate <= 0 or p.seconds <= plan.settle_s + plan.tail_s:
                raise ValueError(f"bad phase {p}: shape one of {', '.join(SHAPES)}, a positive rate, and longer "
                                 f"than settle + tail ({plan.settle_s + plan.tail_s:g} s)")
        if not plan.phases:
            raise ValueError("a phase plan needs at least one phase")
        return plan

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)


class Control:
    """The phase now running: (index, start, end) on the monotonic clock, index -1 while warming up and -2 once
    the plan is over. ``values`` is a list in one process, or a ``multiprocessing.Array('d', 3)`` shared
    with the worker processes."""

    def __init__(self, values: Any = None) -> None:
        self.values = values if values is not None else [float(WARMUP), 0.0, 0.0]

    def read(self) -> tuple[int, float, float]:
        lock = getattr(self.values, "get_lock", None)
        if lock is None:
            return int(self.values[0]), self.values[1], self.values[2]
        with lock():
            return int(self.values[0]), self.values[1], self.values[2]

    def set(self, index: int, start: float, end: float) -> None:
        lock = getattr(self.values, "get_lock", None)
        if lock is None:
            self.values[:] = [float(index), start, end]
            return
        with lock():
            self.values[:] = [float(index), start, end]


class Schedule:
    """One generator's share of the plan's arrivals: it follows the phase the control says is running. At a
    phase change, the arrivals of the old phase that were due but never made (the generator fell behind)
    are counted in ``missed``: they were never answered, so they count against that phase."""

    def __init__(self, plan: Plan, control: Control, share: float, seed: int, missed: MutableSequence[int]) -> None:
        self.plan, self.control, self.share, self.seed, self.missed = plan, control, share, seed, missed
        self.index: int | None = None
        self.arrivals: Arrivals | None = None
        self.start, self.end = 0.0, float("inf")

    def _follow(self, now: float) -> int:
        index, start, end = self.control.read()
        if index != self.index:
            self._count_missed()
            self.index = index
            if index == DONE:
                self.arrivals = None
            else:
                phase = self.plan.phases[max(index, 0)]  # warming up: the first phase's traffic
                self.arrivals = Arrivals(phase.shape, phase.rate * self.share, now if index == WARMUP else start,
                                         self.seed * 1000 + index, self.plan.mix)
                self.end = float("inf") if index == WARMUP else end
                self.start = start
        return index

    def _count_missed(self) -> None:
        if self.arrivals is None or self.index is None or self.index < 0:
            return
        lo, hi = self.start + self.plan.settle_s, self.end - self.plan.tail_s
        while (t := self.arrivals.peek()) < self.end:
            self.arrivals.next()
            if lo <= t <= hi:
                self.missed[self.index] += 1

    def due(self, now: float) -> tuple[float, str] | float:
        """The next arrival (its scheduled time and base shape) when it is due; else seconds to wait."""
        self._follow(now)
        if self.arrivals is None:
            return 0.01
        t = self.arrivals.peek()
        if t >= self.end:
            return 0.005  # this phase has no more arrivals for us: wait for the next one
        if t > now:
            return min(t - now, 0.01)
        return self.arrivals.next()


@dataclass
class PhaseStats:
    index: int
    phase: Phase
    start: float
    end: float
    wall_start: float
    latencies: list[float] = field(default_factory=list)
    shed: int = 0
    #: Ages (s) of the requests dropped unanswered when the phase was over: lower bounds of their latency.
    unanswered: list[float] = field(default_factory=list)
    passed: bool | None = None

    def counts(self, arrival: float, plan: Plan) -> bool:
        return self.start + plan.settle_s <= arrival <= self.end - plan.tail_s


class PhaseBook:
    """The serving side: runs the plan, moves the control on, and files every answer, shed and unanswered
    request under the phase it arrived in."""

    def __init__(self, plan: Plan, control: Control, missed: MutableSequence[int], slo_ms: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.plan, self.control, self.missed, self.slo_ms, self.clock = plan, control, missed, slo_ms, clock
        self.stats: list[PhaseStats] = []
        self.index = WARMUP

    @property
    def current_start(self) -> float:
        return self.stats[-1].start if self.stats else float("-inf")

    def _begin(self, index: int, now: float) -> None:
        phase = self.plan.phases[index]
        self.index = index
        self.stats.append(PhaseStats(index, phase, now, now + phase.seconds, time.time()))
        self.control.set(index, now, now + phase.seconds)

    def start(self) -> None:
        self._begin(0, self.clock())

    def advance(self) -> bool:
        """Move to the next phase when this one is over; False once the plan is."""
        if self.index == DONE:
            return False
        now = self.clock()
        if self.index == WARMUP or now < self.stats[-1].end:
            return True
        done = self.stats[-1]
        done.passed = self.verdict(len(self.stats) - 1)["passed"]
        following = range(self.index + 1, len(self.plan.phases))
        nxt = next((i for i in following if done.passed or not done.phase.group
                    or self.plan.phases[i].group != done.phase.group), None)
        if nxt is None:
            self.index = DONE
            self.control.set(DONE, now, now)
            return False
        self._begin(nxt, now)
        return True

    def _find(self, arrival: float) -> PhaseStats | None:
        for stats in reversed(self.stats):
            if stats.start <= arrival:
                return stats if stats.counts(arrival, self.plan) else None
        return None

    def answered(self, arrival: float, latency_s: float) -> None:
        if (stats := self._find(arrival)) is not None:
            stats.latencies.append(latency_s)

    def shed(self, arrival: float) -> None:
        if (stats := self._find(arrival)) is not None:
            stats.shed += 1

    def unanswered(self, arrival: float) -> None:
        """A request dropped because its phase is over: it waited past the phase's tail, so it is late."""
        if (stats := self._find(arrival)) is not None:
            stats.unanswered.append(max(self.clock() - arrival, self.plan.tail_s))

    def verdict(self, i: int) -> dict[str, Any]:
        """What phase ``i`` measured (so far: answers still queued count once they are dropped)."""
        s = self.stats[i]
        lat = sorted(x * 1000.0 for x in s.latencies)
        late = sum(1 for x in lat if x > self.slo_ms)
        missed = int(self.missed[s.index])
        never = len(s.unanswered) + missed
        total = len(lat) + s.shed + never
        bad = late + s.shed + never
        dropped_pct = round(100.0 * bad / total, 2) if total else None
        # p99 over every request not shed; one never answered counts with its age when dropped (a lower
        # bound), so past 1 % unanswered the p99 is a lower bound
        waited = sorted([*lat, *(x * 1000.0 for x in s.unanswered), *[self.plan.tail_s * 1000.0] * missed])
        p99 = percentile(waited, 99)
        passed = bool(total) and dropped_pct is not None and dropped_pct < MAX_LATE_PCT and \
            p99 is not None and p99 <= self.slo_ms
        counted = s.phase.seconds - self.plan.settle_s - self.plan.tail_s

        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        return {"shape": s.phase.shape, "rate": s.phase.rate, "group": s.phase.group,
                "wall_start": round(s.wall_start, 3), "wall_end": round(s.wall_start + s.phase.seconds, 3),
                "counted_s": round(counted, 3), "requests": len(lat),
                "req_per_s": round(len(lat) / counted, 2) if counted > 0 else None,
                "p50_ms": r(percentile(lat, 50)), "p95_ms": r(percentile(lat, 95)), "p99_ms": r(p99),
                "p99_is_lower_bound": bool(total) and 100.0 * never / total >= MAX_LATE_PCT,
                "late": late, "shed": s.shed, "unanswered": never, "dropped_pct": dropped_pct, "passed": passed}

    def results(self) -> list[dict[str, Any]]:
        return [self.verdict(i) for i in range(len(self.stats))]

