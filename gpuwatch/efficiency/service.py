"""The daemon's accounting: Snapshots in (without waiting), roll-ups and counters out, on its own thread.

The sampler hands each Snapshot to :meth:`Accounting.offer`, which only queues it; a worker thread feeds
the ledger in order, commits each attributed block to the store (one transaction with the high-water mark)
and then adds it to the /metrics totals. When no Snapshot comes for a while (a replay that ended, a stalled
sampler) the pending block is attributed and committed, and at a stop whatever is queued is accounted first.
A crash loses only the block not yet committed (10 to 40 s of snapshot time); a replay run again
skips what was committed before, to the interval.
"""

from __future__ import annotations

import logging
import queue
import threading

from gpuwatch.doctor import diagnose
from gpuwatch.efficiency.ledger import Doctor, Increment, Ledger
from gpuwatch.efficiency.metrics import Totals
from gpuwatch.efficiency.store import Rollup, Store
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)
#: An interval longer than this many sample intervals (and 5 s) was not watched and is not counted.
GAP_INTERVALS = 5.0


#: Snapshots waiting for the worker at most, as the alert worker's: a bound on the backlog's memory (about
#: 2 MiB of 2-GPU, 8-process snapshots; a full-speed replay that outruns the worker then waits for it).
BACKLOG = 256
PUT_TIMEOUT_S = 5.0


class Accounting:
    def __init__(self, store: Store, interval: float, max_owners: int, idle_flush_s: float | None = None,
                 doctor: Doctor = diagnose) -> None:
        self.store = store
        self.doctor = doctor
        self.totals = Totals(max_owners)
        self.max_gap = max(5.0, GAP_INTERVALS * interval)
        self.idle_flush_s = idle_flush_s if idle_flush_s is not None else max(5.0, 5.0 * interval)
        self._queue: queue.Queue[Snapshot | None] = queue.Queue(maxsize=BACKLOG)
        #: Snapshots not accounted because the worker was stuck (each one's interval is a gap in the roll-ups).
        self.dropped = 0
        self._ledger: Ledger | None = None
        self._origin = "live"
        #: The newest snapshot time accounted (None before the first).
        self.last_time: float | None = None
        self._thread: threading.Thread | None = None
        #: Blocks committed; the tests wait on it.
        self.commits = 0

    def offer(self, snap: Snapshot) -> None:
        """Called on the sampler thread. A live sampler never fills the backlog (a snapshot a second against
        a worker that takes a millisecond); a replay at full speed does, and then waits for the worker, so
        the backlog's memory stays bounded. A worker stuck for PUT_TIMEOUT_S loses the snapshot, counted."""
        try:
            self._queue.put(snap, timeout=PUT_TIMEOUT_S)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("the efficiency accounting is stuck: snapshots are not accounted (counted in "
                            "/healthz as efficiency_dropped)")

    @property
    def backlog(self) -> int:
        """Snapshots waiting for the worker (0 while it keeps up)."""
        return self._queue.qsize()

    def _commit(self, inc: Increment | None) -> None:
        if not inc:
            return
        try:
            self.store.commit(inc, self._origin)
        except Exception:  # a full disk must not stop the daemon; the lost counters stay in step with the file
            log.exception("could not write the efficiency roll-ups; this block is not counted")
            return
        self.totals.add_lost(inc)  # the GPU-seconds by state were added tick by tick (on_tick)
        self.commits += 1

    def _run(self) -> None:
        while True:
            try:
                snap = self._queue.get(timeout=self.idle_flush_s)
            except queue.Empty:
                if self._ledger is not None:
                    self._commit(self._ledger.flush())
                continue
            if snap is None:
                break
            if self._ledger is None:
                self._origin = snap.origin
                self._ledger = Ledger(self.max_gap, skip_until=self.store.mark(snap.origin), doctor=self.doctor,
                                      on_tick=self.totals.add_tick)
            self.last_time = snap.time
            try:
                self._commit(self._ledger.add(snap))
            except Exception:
                log.exception("efficiency accounting failed on a snapshot; skipping it")
        if self._ledger is not None:
            self._commit(self._ledger.flush())

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpuwatch-efficiency", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Account for everything queued, commit the last block, close the store."""
        self._queue.put(None, timeout=30)
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.store.close()

    @property
    def origin(self) -> str:
        return self._origin

    def rollup(self, since: float) -> Rollup:
        return self.store.rollup(since)
