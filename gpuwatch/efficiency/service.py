"""The daemon's accounting: Snapshots in, roll-ups and counters out.

The sampler hands each Snapshot to :meth:`Accounting.offer`, which feeds the ledger on the sampler's thread
(arithmetic: a tick's intervals, a block's attribution) and adds each tick's GPU-seconds to the /metrics
totals as they are watched. Each attributed block is a job for the worker thread (:mod:`.worker`), which
commits it to the store (one transaction with the high-water mark) and then adds its lost seconds to the
totals. When no Snapshot comes for a while (a replay that ended, a stalled sampler) the worker attributes
and commits the pending block, and at a stop whatever is queued is committed first.
A crash loses only the block not yet committed (10 to 40 s of snapshot time); a replay run again
skips what was committed before, to the interval. A block the store cannot take (a full disk) is kept in
memory, in order, and written with the next ones once a write succeeds (tried again each tick while it
lasts), as the outbox keeps unsaved alert transitions; meanwhile /healthz reports ``efficiency_unsaved`` and
the daemon is unhealthy.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections import deque

from gpuwatch.efficiency.ledger import Increment, Ledger
from gpuwatch.efficiency.metrics import Totals
from gpuwatch.efficiency.store import Rollup, Store
from gpuwatch.efficiency.worker import SnapshotWorker
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)
#: An interval longer than this many sample intervals (and 5 s) was not watched and is not counted.
GAP_INTERVALS = 5.0

#: Blocks kept in memory while the store takes no writes (10 to 40 s each: more than two days); past it the
#: oldest are dropped, counted and logged.
MAX_UNSAVED = 8192


class Accounting(SnapshotWorker):
    thread_name = "gpuwatch-efficiency"
    stuck_warning = ("the efficiency accounting is stuck: roll-up blocks are not written (counted in /healthz "
                     "as efficiency_dropped)")

    def __init__(self, store: Store, interval: float, max_owners: int, idle_flush_s: float | None = None) -> None:
        super().__init__(store, idle_flush_s if idle_flush_s is not None else max(5.0, 5.0 * interval))
        self.max_owners = max_owners
        self.totals = Totals(max_owners)
        self.interval = interval
        self.max_gap = max(5.0, GAP_INTERVALS * interval)
        self._ledger: Ledger | None = None
        self._origin = "live"
        #: The newest snapshot time accounted (None before the first).
        self.last_time: float | None = None
        #: Blocks committed; the tests wait on it.
        self.commits = 0
        #: Blocks the store did not take yet (a full disk), oldest first; each write tries them all, in order.
        self._unsaved: deque[Increment] = deque()
        #: Blocks dropped because more than MAX_UNSAVED waited.
        self.unsaved_dropped = 0
        #: Why the last write failed (None once one succeeds), and failed writes since the last success.
        self.last_error: str | None = None
        self.consecutive_failures = 0

    @property
    def unsaved(self) -> int:
        """Blocks waiting in memory for the store to take writes again (0 when every block is written). The
        block being written right now is not one: only a failed write leaves blocks waiting, and /healthz
        read during a good write must not call the daemon unhealthy."""
        return len(self._unsaved) if self.consecutive_failures else 0

    def _commit(self, inc: Increment | None) -> None:
        """Queue ``inc`` (if any) behind the blocks not yet written, then write them in order; a write that
        fails keeps the rest for the next try (a full disk must not stop the daemon nor lose the hours)."""
        if inc:
            self._unsaved.append(inc)
            if len(self._unsaved) > MAX_UNSAVED:
                self._unsaved.popleft()
                self.unsaved_dropped += 1
                if self.unsaved_dropped == 1 or self.unsaved_dropped % 1000 == 0:
                    log.error("the efficiency roll-ups have not taken a write for a long time: dropped %d "
                              "block(s) so far; their GPU-seconds are lost", self.unsaved_dropped)
        while self._unsaved:
            block = self._unsaved[0]
            try:
                self.store.commit(block, self._origin)
            except Exception as exc:  # the lost counters stay in step with the file: added once written
                self._failed(exc)
                return
            self._unsaved.popleft()
            if self.consecutive_failures:
                log.warning("writing the efficiency roll-ups works again after %d failure(s)",
                            self.consecutive_failures)
            self.consecutive_failures, self.last_error = 0, None
            self.totals.add_lost(block)  # the GPU-seconds by state were added tick by tick (on_tick)
            self.commits += 1

    def _failed(self, exc: Exception) -> None:
        """Count a failed write; log it once per outage (a full disk fails every snapshot), with the traceback
        only for errors that are bugs rather than the disk or the file."""
        error = f"{type(exc).__name__}: {exc}"[:300]
        self.consecutive_failures += 1
        if error != self.last_error:
            log.error("writing the efficiency roll-ups failed: %s (kept in memory and retried; logged once)",
                      error, exc_info=None if isinstance(exc, (OSError, sqlite3.Error)) else exc)
        self.last_error = error

    def _take(self, snap: Snapshot) -> None:
        if self._ledger is None:
            self._origin = snap.origin
            self._ledger = Ledger(self.max_gap, skip_until=self.store.mark(snap.origin),
                                  max_owners=self.max_owners, interval=self.interval,
                                  on_tick=self.totals.add_tick)
        self.last_time = snap.time
        inc = self._ledger.add(snap)
        if inc:
            self.later(functools.partial(self._commit, inc))
        elif self._unsaved and self.backlog == 0:  # a full disk kept blocks back: try them again each tick
            self.later(functools.partial(self._commit, None))

    def _idle(self) -> None:
        """No Snapshot for a while: attribute and commit the pending block (and retry what a full disk kept)."""
        with self._lock:
            inc = self._ledger.flush() if self._ledger is not None else None
        self._commit(inc)

    def _finish(self) -> None:
        self._idle()
        if self._unsaved:
            log.error("stopping with %d efficiency roll-up block(s) the store did not take (%s); their "
                      "GPU-seconds are lost", len(self._unsaved), self.last_error)

    @property
    def origin(self) -> str:
        return self._origin

    def rollup(self, since: float) -> Rollup:
        return self.store.rollup(since)
