"""The ledger: sample intervals in, attributed increments out, a block of snapshot time at a time.

Intervals are gathered for :data:`STEP_S` seconds of snapshot time, then the doctor judges the window that
ends there (the last :data:`WINDOW_S` seconds, as the daemon's live doctor does) and the block's lost
seconds go to each GPU's top finding. When the doctor has no verdict yet for a GPU that lost time (it needs
a few seconds of a new load to see it), the block waits for up to :data:`MAX_WAIT_S` seconds so the cause
it names then covers the start of the load too; after that, the loss goes to ``held_idle`` or
``unexplained``.

Everything here follows snapshot time, not the wall clock: the same stream of Snapshots gives the same
increments, which is what lets a restarted daemon replay a recording and skip, to the interval, what it
had already committed (``skip_until``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpuwatch.doctor import diagnose
from gpuwatch.doctor.current import window
from gpuwatch.efficiency.account import GpuInterval, Owner, intervals, owner_of
from gpuwatch.model.causes import HELD_IDLE, NO_PROCESS, UNEXPLAINED, cause_of
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot

STEP_S = 10.0
WINDOW_S = 30.0
MAX_WAIT_S = 30.0
HOUR = 3600
#: Width, in percent, of the bins of SM activity (effective share of allocated time) kept per hour.
BIN_PCT = 5
BINS = 100 // BIN_PCT
#: What to try for the causes the doctor has no rule for (the doctor's own fix text covers the others).
OWN_FIXES = {
    HELD_IDLE: "A process holds GPU memory and runs nothing: end it, or free the memory it keeps "
               "(del the model, torch.cuda.empty_cache()) while it waits.",
    NO_PROCESS: "Nothing runs on this GPU: give it back to the scheduler, or schedule work on it.",
    UNEXPLAINED: "Run 'gpuwatch doctor --stacks' while it happens to see where the feeding process spends "
                 "its time.",
}
Doctor = Callable[[Sequence[Snapshot]], list[Finding]]


def hour_of(t: float) -> int:
    return int(t // HOUR) * HOUR


@dataclass
class Increment:
    """GPU-seconds to add: ``seconds[(hour, gpu)]`` = [observed, allocated, busy, effective],
    ``lost[(hour, gpu, cause, owner)]``, the latest (title, fix) per cause, the SM-activity histogram, and
    the newest snapshot time covered (the high-water mark)."""

    seconds: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    lost: dict[tuple[int, int, str, Owner], float] = field(default_factory=dict)
    fixes: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Allocated seconds by bin of the block's mean SM activity (``hist[(hour, gpu, bin)]``): percentiles of
    #: 10-second means for the headroom, not of single samples (a loop that alternates would read as peaks).
    hist: dict[tuple[int, int, int], float] = field(default_factory=dict)
    until: float = 0.0

    def add_interval(self, iv: GpuInterval, cause: str, owner: Owner) -> None:
        hour = hour_of(iv.end)
        row = self.seconds.setdefault((hour, iv.gpu), [0.0, 0.0, 0.0, 0.0])
        for i, v in enumerate((iv.observed, iv.allocated, iv.busy, iv.effective)):
            row[i] += v
        if iv.unallocated > 0:
            k = (hour, iv.gpu, NO_PROCESS, owner_of(None, iv.sample))
            self.lost[k] = self.lost.get(k, 0.0) + iv.unallocated
        lost = max(0.0, iv.allocated - iv.effective)
        if lost > 0:
            k = (hour, iv.gpu, cause, owner)
            self.lost[k] = self.lost.get(k, 0.0) + lost

    def __bool__(self) -> bool:
        return bool(self.seconds)


#: Info findings that still say where a GPU's time goes: a server with no work, processes taking turns.
INFO_CAUSES = frozenset({"demand_bound", "time_slicing"})


def top_by_gpu(findings: Sequence[Finding]) -> dict[int, Finding]:
    """Each GPU's top finding: its highest-ranked warning, else ``healthy``, else an info finding that says
    where the time goes (``findings`` come ranked)."""
    top: dict[int, Finding] = {}
    for f in findings:
        if f.gpu_index is not None and f.severity != "info" and f.gpu_index not in top:
            top[f.gpu_index] = f
    for f in findings:
        if f.gpu_index is not None and f.code == "healthy":
            top.setdefault(f.gpu_index, f)
    for f in findings:
        if f.gpu_index is not None and f.code in INFO_CAUSES:
            top.setdefault(f.gpu_index, f)
    return top


def _fallback(iv: GpuInterval) -> str:
    return HELD_IDLE if iv.busy <= 0 and iv.processes else UNEXPLAINED


def _block_means(pending: Sequence[GpuInterval]) -> dict[tuple[int, int], tuple[float, float]]:
    """(allocated, effective) seconds per (hour, GPU) of a block, where something was allocated."""
    sums: dict[tuple[int, int], tuple[float, float]] = {}
    for iv in pending:
        a, e = sums.get((hour_of(iv.end), iv.gpu), (0.0, 0.0))
        sums[(hour_of(iv.end), iv.gpu)] = (a + iv.allocated, e + iv.effective)
    return {k: v for k, v in sums.items() if v[0] > 0}


class Ledger:
    """Feed it every Snapshot in order with :meth:`add`; it returns an :class:`Increment` each time a
    block is attributed (and :meth:`flush` the rest, at a stop or when the stream ends)."""

    def __init__(self, max_gap: float, skip_until: float = float("-inf"), doctor: Doctor = diagnose,
                 on_tick: Callable[[Sequence[GpuInterval]], None] | None = None) -> None:
        """``on_tick``: told each snapshot's intervals as they are added (the /metrics counters, per tick)."""
        self.max_gap = max_gap
        self.skip_until = skip_until
        self.doctor = doctor
        self.on_tick = on_tick
        self._history: deque[Snapshot] = deque()
        self._pending: list[GpuInterval] = []
        self._block_end: float | None = None

    def add(self, snap: Snapshot) -> Increment | None:
        prev = self._history[-1] if self._history else None
        self._history.append(snap)
        while self._history and self._history[0].time < snap.time - WINDOW_S - MAX_WAIT_S:
            self._history.popleft()
        if prev is None or snap.time <= self.skip_until:
            return None
        new = intervals(prev, snap, self.max_gap)
        if not new:
            return None
        if self.on_tick is not None:
            self.on_tick(new)
        if not self._pending:
            self._block_end = (snap.time // STEP_S + 1) * STEP_S
        self._pending.extend(new)
        assert self._block_end is not None
        if snap.time < self._block_end:
            return None
        findings = self.doctor(window(list(self._history), WINDOW_S))
        top = top_by_gpu(findings)
        waiting = {iv.gpu for iv in self._pending if iv.allocated > iv.effective and iv.gpu not in top}
        if waiting and snap.time - self._pending[0].end < MAX_WAIT_S:
            self._block_end += STEP_S  # ask again a step later, not at every snapshot
            return None
        return self._attribute(top)

    def flush(self) -> Increment | None:
        """Attribute whatever is pending with the doctor's verdict on the window that ends now."""
        if not self._pending:
            return None
        return self._attribute(top_by_gpu(self.doctor(window(list(self._history), WINDOW_S))))

    def _attribute(self, top: dict[int, Finding]) -> Increment:
        inc = Increment(until=self._pending[-1].end)
        for iv in self._pending:
            finding = top.get(iv.gpu)
            cause = cause_of(finding.code) if finding is not None else None
            if cause is None:
                cause = _fallback(iv)
            if finding is not None and cause == finding.code:
                inc.fixes[cause] = (finding.title, finding.fix)
            elif cause in OWN_FIXES:
                inc.fixes.setdefault(cause, (cause.replace("_", " "), OWN_FIXES[cause]))
            inc.add_interval(iv, cause, iv.owner(finding.pid if finding is not None else None))
        for (hour, gpu), (allocated, effective) in _block_means(self._pending).items():
            b = min(BINS - 1, int(100.0 * effective / allocated) // BIN_PCT)
            inc.hist[(hour, gpu, b)] = inc.hist.get((hour, gpu, b), 0.0) + allocated
        self._pending = []
        self._block_end = None
        return inc
