"""A window's sampled stacks and feeders reduced to what the rules reason with, one process at a time.

Stacks: for each GPU process, the **feeding thread(s)** (the threads whose stacks touch the GPU: waits,
launches, the allocator, collectives; else the busiest thread; else the main thread) and where their
samples go, by mechanism (``mechanisms.py``) and by code location (the innermost frame of the user's own
code). When the feeding thread mostly waits on a lock or a queue, the other threads that run meanwhile
are what it waits for: their shares come too (``holders``).

(The feeders' windows are ``feeder_window``.)
"""

from __future__ import annotations

import dataclasses
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuwatch.doctor.code_location import location
from gpuwatch.doctor.mechanisms import (
    awaits_result,
    calls_service,
    classify,
    hands_off,
    is_waiting,
    pins_host_memory,
    sends_to_peer,
    waits_for_gil,
    words,
)
from gpuwatch.model.stacks import StackSample

GPU_MECHANISMS = ("gpu_wait", "launch", "allocator", "collective")
#: Share of the feeding thread's samples on a lock or queue from which the other running threads are what
#: it waits for (a third: a queue consumer that waits less than that is fed fast enough).
LOCK_HOLDERS_SHARE = 0.3


@dataclass(frozen=True)
class StackEvidence:
    """Where some threads' sampled time went: (mechanism or None, share) and (location, share, mechanism),
    most first; shares of all their samples."""

    pid: int
    tids: tuple[int, ...]
    samples: int
    shares: tuple[tuple[str | None, float], ...]
    locations: tuple[tuple[str, float, str | None], ...]
    holders: StackEvidence | None = None
    #: Share of the samples in the allocator that page-locks host memory (no GPU memory comes or goes).
    pinning: float = 0.0
    #: Share of the samples waiting for a result another thread hands over (a queue, a future, an event).
    awaits: float = 0.0
    #: Share of the samples waiting to hand a result to a full queue (its consumer is slower).
    puts: float = 0.0
    #: Share of the samples awaiting the reply of a service the process called (an HTTP or gRPC client).
    calls: float = 0.0
    #: Share of the samples blocked sending on a socket or a pipe (or writing a file: ``/proc`` tells which).
    sends: float = 0.0
    #: Share of the samples waiting to take the GIL back (``mechanisms.waits_for_gil``): Python, but off a core.
    gil: float = 0.0

    def share(self, *mechanisms: str | None) -> float:
        return sum(s for m, s in self.shares if m in mechanisms)

    @property
    def mechanism(self) -> str | None:
        """The mechanism most samples are in (None: none classified)."""
        return next((m for m, _ in self.shares if m is not None), None)

    def relabel(self, old: str, new: str) -> StackEvidence:
        """The same samples with mechanism ``old`` read as ``new``: what the kernel says where frames cannot
        (an event loop's poll that only a timer can end is a sleep, not a wait for input)."""
        merged: defaultdict[str | None, float] = defaultdict(float)
        for m, share in self.shares:
            merged[new if m == old else m] += share
        return dataclasses.replace(
            self, shares=tuple(sorted(merged.items(), key=lambda x: (-x[1], x[0] or ""))),
            locations=tuple((loc, share, new if m == old else m) for loc, share, m in self.locations))

    def top_locations(self, n: int = 3) -> tuple[tuple[str, float], ...]:
        return tuple((loc, round(s, 3)) for loc, s, _ in self.locations[:n])

    @property
    def working(self) -> float:
        """The share of the samples in which these threads work rather than wait."""
        return sum(s for m, s in self.shares if not is_waiting(m))

    def working_share(self, *mechanisms: str | None) -> float:
        """The share of ``mechanisms`` among the samples in which these threads work rather than wait (0 when
        they only wait)."""
        working = self.working
        return self.share(*mechanisms) / working if working > 0 else 0.0

    def working_locations(self, n: int = 3) -> tuple[tuple[str, float], ...]:
        """The locations where these threads work rather than wait (shares of those): what other threads that
        wait for them (a queue's consumer, a thread that wants the GIL) are held up by."""
        working = [(loc, s) for loc, s, m in self.locations if not is_waiting(m)]
        total = sum(s for _, s in working)
        if total <= 0:
            return self.top_locations(n)
        return tuple((loc, round(s / total, 3)) for loc, s in working[:n])

    def line(self, who: str = "the feeding thread") -> str:
        """"the feeding thread (471) spends 96% in model.py:preprocess (a torch op on the CPU), 4% in ..."."""
        parts = [f"{100 * s:.0f}% in {loc} ({words(m)})" for loc, s, m in self.locations[:3] if s >= 0.01]
        tids = "/".join(str(t) for t in self.tids[:3])
        line = f"{who} ({tids}, {self.samples} stack samples) spends " + ", ".join(parts)
        if len(self.shares) > 1:
            line += "; by mechanism: " + ", ".join(f"{100 * s:.0f}% {words(m)}" for m, s in self.shares[:4]
                                                   if s >= 0.01)
        return line


@dataclass(frozen=True, slots=True)
class _Row:
    """One stack of a sample, classified: what the reductions count."""

    tid: int
    mechanism: str | None
    location: str
    count: int
    idle: bool
    pinning: bool = False
    awaits: bool = False
    puts: bool = False
    calls: bool = False
    sends: bool = False
    gil: bool = False


#: Rows of the samples read lately, by ``id`` (the entry keeps its sample alive, so the id is not reused while
#: it is cached): a live window is judged again at every call, and hashing deep stacks every time would cost
#: more than classifying them once.
_ROWS: OrderedDict[int, tuple[StackSample, tuple[_Row, ...]]] = OrderedDict()
ROWS_CACHED = 1024


def rows(sample: StackSample) -> tuple[_Row, ...]:
    hit = _ROWS.get(id(sample))
    if hit is not None and hit[0] is sample:
        _ROWS.move_to_end(id(sample))
        return hit[1]
    out = tuple(_Row(t.tid, (m := classify(t)), location(t) or "?", t.count, t.idle,
                     m == "allocator" and pins_host_memory(t), m == "lock" and awaits_result(t),
                     m == "lock" and hands_off(t),
                     m == "network" and calls_service(t), m in ("network", "storage") and sends_to_peer(t),
                     m == "python" and waits_for_gil(t))
                for t in sample.stacks)
    _ROWS[id(sample)] = (sample, out)
    if len(_ROWS) > ROWS_CACHED:
        _ROWS.popitem(last=False)
    return out


def _reduce(pid: int, stacks: Sequence[_Row]) -> StackEvidence | None:
    n = sum(s.count for s in stacks)
    if n == 0:
        return None
    mech: Counter[str | None] = Counter()
    locs: Counter[str] = Counter()
    loc_mech: dict[str, Counter[str | None]] = {}
    for s in stacks:
        mech[s.mechanism] += s.count
        locs[s.location] += s.count
        loc_mech.setdefault(s.location, Counter())[s.mechanism] += s.count
    return StackEvidence(
        pid=pid, tids=tuple(sorted({s.tid for s in stacks})), samples=n,
        shares=tuple(sorted(((m, c / n) for m, c in mech.items()), key=lambda x: (-x[1], x[0] or ""))),
        locations=tuple((loc, c / n, loc_mech[loc].most_common(1)[0][0])
                        for loc, c in sorted(locs.items(), key=lambda x: (-x[1], x[0]))),
        pinning=sum(s.count for s in stacks if s.pinning) / n, awaits=sum(s.count for s in stacks if s.awaits) / n,
        puts=sum(s.count for s in stacks if s.puts) / n,
        calls=sum(s.count for s in stacks if s.calls) / n, sends=sum(s.count for s in stacks if s.sends) / n,
        gil=sum(s.count for s in stacks if s.gil) / n)


def ranked(evidence: Sequence[StackEvidence]) -> StackEvidence | None:
    """Several processes' evidence as one (the feeders a finding names, say): their samples pooled, so their
    code locations are ranked by the time each took across all of them."""
    if len(evidence) <= 1:
        return evidence[0] if evidence else None
    n = sum(e.samples for e in evidence)
    mech: dict[str | None, float] = defaultdict(float)
    locs: dict[str, float] = defaultdict(float)
    loc_mech: dict[str, dict[str | None, float]] = defaultdict(lambda: defaultdict(float))
    for e in evidence:
        for m, s in e.shares:
            mech[m] += s * e.samples
        for loc, s, m in e.locations:
            locs[loc] += s * e.samples
            loc_mech[loc][m] += s * e.samples
    return StackEvidence(
        pid=evidence[0].pid, tids=tuple(sorted({t for e in evidence for t in e.tids})), samples=n,
        shares=tuple(sorted(((m, c / n) for m, c in mech.items()), key=lambda x: (-x[1], x[0] or ""))),
        locations=tuple((loc, c / n, max(loc_mech[loc].items(), key=lambda x: x[1])[0])
                        for loc, c in sorted(locs.items(), key=lambda x: (-x[1], x[0]))))


def feeding_threads(stacks: Sequence[_Row], pid: int, top_tid: int | None) -> set[int]:
    """The threads that feed the GPU: those whose stacks touch it; else the busiest; else the main one."""
    gpu = {s.tid for s in stacks if s.mechanism in GPU_MECHANISMS}
    if gpu:
        return gpu
    tids = {s.tid for s in stacks}
    for tid in (top_tid, pid):
        if tid in tids:
            return {tid}
    return tids


def process_stacks(samples: Iterable[StackSample], pid: int, top_tid: int | None) -> StackEvidence | None:
    """The feeding threads' evidence over every sample of ``pid`` in the window (and the lock holders')."""
    stacks = [r for s in samples if s.pid == pid for r in rows(s)]
    if not stacks:
        return None
    feeding = feeding_threads(stacks, pid, top_tid)
    ev = _reduce(pid, [s for s in stacks if s.tid in feeding])
    if ev is None:
        return None
    if ev.share("lock") + ev.gil >= LOCK_HOLDERS_SHARE:  # a lock, a queue or the GIL: others hold it
        others = [s for s in stacks if s.tid not in feeding and not s.idle]
        holders = _reduce(pid, others)
        if holders is not None:
            ev = dataclasses.replace(ev, holders=holders)
    return ev
