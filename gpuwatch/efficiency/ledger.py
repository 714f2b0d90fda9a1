"""The ledger: sample intervals in, attributed increments out, a block of snapshot time at a time.

Intervals are gathered for :data:`STEP_S` seconds of snapshot time, then the doctor judges the window that
ends there (the last :data:`WINDOW_S` seconds, as the daemon's live doctor does) and the block's lost
seconds go to each GPU's verdict (:func:`gpuwatch.doctor.verdict.verdict`, the finding the doctor's
accuracy is measured on). The judge is the doctor itself on the block's own window, never the live
doctor's steadied view: that one depends on when readers asked, and a daemon replaying a recording must
charge what ``gpuwatch report --replay`` charges for it. When the doctor has no verdict yet for a GPU
that lost time (it needs a few seconds of a new load to see it), or its verdict about a thread was judged
from /proc while the stack sampler has yet to sample that process (``doctor.diagnose.awaits_stacks``: the
stacks may name another cause), the block waits for up to :data:`MAX_WAIT_S` seconds so the cause named
then covers the start of the load too; after that, the loss goes to the verdict there is, else to
``held_idle`` or ``unexplained``.

Everything here follows snapshot time, not the wall clock: the same stream of Snapshots gives the same
increments, which is what lets a restarted daemon replay a recording and skip, to the interval, what it
had already committed (``skip_until``). Time that does not move forward (a repeated or earlier timestamp:
a clock set back, a damaged recording) counts as one usual sampling interval, as the alert engine counts
it, and is said once: otherwise the intervals would add up to nothing, and the window grow without end.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpuwatch.doctor import diagnose
from gpuwatch.doctor.current import window
from gpuwatch.doctor.diagnose import awaits_stacks
from gpuwatch.doctor.verdict import verdicts
from gpuwatch.efficiency.account import GpuInterval, intervals, owner_of
from gpuwatch.efficiency.rows import (
    MAX_OWNERS,
    UNDERUSED_PCT,
    GpuHour,
    HistKey,
    LostKey,
    Owner,
    OwnerCap,
    OwnerKey,
    OwnerUse,
    States,
)
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
#: Snapshots kept for the doctor's window at most, whatever their times say (30 s + 30 s at 0.05 s is 1 200).
MAX_HISTORY = 4096
log = logging.getLogger(__name__)


def hour_of(t: float) -> int:
    return int(t // HOUR) * HOUR


@dataclass
class Increment:
    """GPU-seconds to add: :class:`States` per (hour, GPU), lost seconds per (hour, GPU, cause, owner), the
    latest (title, fix) per cause, the SM-activity histogram, and the newest snapshot time covered (the
    high-water mark)."""

    seconds: dict[GpuHour, States] = field(default_factory=dict)
    lost: dict[LostKey, float] = field(default_factory=dict)
    fixes: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Allocated seconds by bin of the block's mean SM activity: percentiles of 10-second means for the
    #: headroom, not of single samples (a loop that alternates would read as peaks).
    hist: dict[HistKey, float] = field(default_factory=dict)
    #: Each owner's use of each GPU per hour: allocated, effective and under-used seconds and its peaks.
    owners: dict[OwnerKey, OwnerUse] = field(default_factory=dict)
    until: float = 0.0

    def add_interval(self, iv: GpuInterval, cause: str, owner: Owner, cap: Callable[[Owner], Owner]) -> None:
        """``iv``'s seconds; its lost part to ``cause`` and ``owner`` (nobody's part to ``no_process``), each
        owner named or folded into ``(other)`` by ``cap``."""
        at = GpuHour(hour_of(iv.end), iv.gpu)
        self.seconds[at] = self.seconds.get(at, States()).plus(
            States(iv.observed, iv.allocated, iv.busy, iv.effective))
        if iv.unallocated > 0:
            self._lose(LostKey(at.hour, at.gpu, NO_PROCESS, cap(owner_of(None, iv.sample))), iv.unallocated)
        lost = max(0.0, iv.allocated - iv.effective)
        if lost > 0:
            self._lose(LostKey(at.hour, at.gpu, cause, cap(owner)), lost)

    def _lose(self, key: LostKey, seconds: float) -> None:
        self.lost[key] = self.lost.get(key, 0.0) + seconds

    def __bool__(self) -> bool:
        return bool(self.seconds)


def _fallback(iv: GpuInterval) -> str:
    return HELD_IDLE if iv.busy <= 0 and iv.processes else UNEXPLAINED


def _block_means(pending: Sequence[GpuInterval]) -> dict[tuple[int, int], tuple[float, float]]:
    """(allocated, effective) seconds per (hour, GPU) of a block, where something was allocated."""
    sums: dict[tuple[int, int], tuple[float, float]] = {}
    for iv in pending:
        a, e = sums.get((hour_of(iv.end), iv.gpu), (0.0, 0.0))
        sums[(hour_of(iv.end), iv.gpu)] = (a + iv.allocated, e + iv.effective)
    return {k: v for k, v in sums.items() if v[0] > 0}


def _owner_use(ivs: Sequence[GpuInterval]) -> OwnerUse:
    """One owner's block on one GPU: its mean SM activity is the block's peak candidate and says whether the
    block was under-used (10-second means, as the headroom's histogram, so a loop that alternates does not
    read as a peak)."""
    allocated = sum(iv.allocated for iv in ivs)
    effective = sum(iv.effective for iv in ivs)
    sm = 100.0 * effective / allocated
    return OwnerUse(allocated, effective, allocated if sm < UNDERUSED_PCT else 0.0, sm,
                    float(max((iv.mem_used or 0) for iv in ivs)),
                    float(max((iv.sample.mem_total_bytes or 0) for iv in ivs)))


class Ledger:
    """Feed it every Snapshot in order with :meth:`add`; it returns an :class:`Increment` each time a
    block is attributed (and :meth:`flush` the rest, at a stop or when the stream ends)."""

    def __init__(self, max_gap: float, skip_until: float = float("-inf"), doctor: Doctor = diagnose,
                 max_owners: int = MAX_OWNERS, interval: float | None = None,
                 on_tick: Callable[[Sequence[GpuInterval]], None] | None = None) -> None:
        """``on_tick``: told each snapshot's intervals as they are added (the /metrics counters, per tick)."""
        self.max_gap = max_gap
        self.max_owners = max_owners
        #: The owners named in each hour still open (the roll-ups' span of the one cap, :class:`OwnerCap`).
        self._owners: dict[int, OwnerCap] = {}
        self.skip_until = skip_until
        self.doctor = doctor
        self.on_tick = on_tick
        self._history: deque[Snapshot] = deque(maxlen=MAX_HISTORY)
        self._pending: list[GpuInterval] = []
        self._block_end: float | None = None
        #: The last forward step between two snapshots: what a step that does not move forward counts as.
        self._step = min(interval, max_gap) if interval else max_gap / 5.0
        #: Seconds added to every snapshot time since time last failed to move forward.
        self._offset = 0.0
        #: Snapshots whose time did not move forward (each counted as one usual interval).
        self.non_increasing = 0

    def _forward(self, snap: Snapshot, prev: Snapshot | None) -> Snapshot:
        """``snap`` on a time line that only moves forward (shifted by the offset in force)."""
        t = snap.time + self._offset
        if prev is not None:
            if t <= prev.time:
                self.non_increasing += 1
                if self.non_increasing == 1:
                    log.warning("snapshot time %.3f is not after the one before (%.3f): each such step counts "
                                "as one sampling interval (%g s), as the alert rules count it; later ones are "
                                "not logged", snap.time, prev.time - self._offset, self._step)
                self._offset += prev.time + self._step - t
                t = prev.time + self._step
            elif t - prev.time <= self.max_gap:
                self._step = t - prev.time
        return snap if t == snap.time else dataclasses.replace(snap, time=t)

    def add(self, snap: Snapshot) -> Increment | None:
        prev = self._history[-1] if self._history else None
        snap = self._forward(snap, prev)
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
        judged = window(list(self._history), WINDOW_S)
        top = verdicts(self.doctor(judged))
        waiting = {iv.gpu for iv in self._pending if iv.allocated > iv.effective
                   and (iv.gpu not in top or awaits_stacks(judged, top[iv.gpu]))}
        if waiting and snap.time - self._pending[0].end < MAX_WAIT_S:
            self._block_end += STEP_S  # ask again a step later, not at every snapshot
            return None
        return self._attribute(top)

    @property
    def last_time(self) -> float | None:
        """The newest snapshot time on the ledger's forward-only time line (None before the first)."""
        return self._history[-1].time if self._history else None

    def flush(self) -> Increment | None:
        """Attribute whatever is pending with the doctor's verdict on the window that ends now."""
        if not self._pending:
            return None
        return self._attribute(verdicts(self.doctor(window(list(self._history), WINDOW_S))))

    def _cap(self, hour: int) -> OwnerCap:
        if hour not in self._owners:
            self._owners = {h: c for h, c in self._owners.items() if h >= hour - HOUR}
            self._owners[hour] = OwnerCap(self.max_owners)
        return self._owners[hour]

    def _attribute(self, top: dict[int, Finding]) -> Increment:
        inc = Increment(until=self._pending[-1].end)
        owners: dict[OwnerKey, list[GpuInterval]] = {}
        for iv in self._pending:
            finding = top.get(iv.gpu)
            cause = cause_of(finding.code) if finding is not None else None
            if cause is None:
                cause = _fallback(iv)
            if finding is not None and cause == finding.code:
                inc.fixes[cause] = (finding.title, finding.fix)
            elif cause in OWN_FIXES:
                inc.fixes.setdefault(cause, (cause.replace("_", " "), OWN_FIXES[cause]))
            owner = iv.owner(finding.pid if finding is not None else None)
            inc.add_interval(iv, cause, owner, self._cap(hour_of(iv.end)))
            if iv.allocated > 0:
                owners.setdefault(OwnerKey(hour_of(iv.end), iv.gpu, self._cap(hour_of(iv.end))(owner)),
                                  []).append(iv)
        for ok, ivs in owners.items():
            inc.owners[ok] = inc.owners.get(ok, OwnerUse()).plus(_owner_use(ivs))
        for (hour, gpu), (allocated, effective) in _block_means(self._pending).items():
            b = min(BINS - 1, int(100.0 * effective / allocated) // BIN_PCT)
            key = HistKey(hour, gpu, b)
            inc.hist[key] = inc.hist.get(key, 0.0) + allocated
        self._pending = []
        self._block_end = None
        return inc
