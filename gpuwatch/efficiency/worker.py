"""Snapshots worked on as the sampler offers them; what may wait on the disk handed to a worker thread.

The accounting's work on a Snapshot is arithmetic: the ledger's intervals each tick, a block's attribution
every 10 to 40 s of snapshot time, the rollout detector's bookkeeping (:class:`Rider`). :meth:`SnapshotWorker.offer`
does it on the sampler's thread, which is awake and has the Snapshot at hand. What may wait on the disk (a
block's commit, a rollout kept and queued for the receivers) is a *job* for the worker thread, in order, with
a bounded backlog (:meth:`SnapshotWorker.later`). The worker wakes for a job, and every ``idle_s`` to see
whether the Snapshots stopped coming (then the subclass's :meth:`~SnapshotWorker._idle` runs: the accounting
commits its pending block). A worker woken every tick to take the Snapshot itself cost more in the waking
and in running cold code than the work did; :meth:`SnapshotWorker.stop` lets it finish what is queued before
the store is closed.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol

from gpuwatch.efficiency.store import Store
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)

#: Jobs waiting for the worker at most: a bound on the backlog's memory (a block's commit each 10 to 40 s of
#: snapshot time: hours of a stuck disk; a full-speed replay that outruns the disk then waits for it).
BACKLOG = 256
PUT_TIMEOUT_S = 5.0

Job = Callable[[], None]


class Rider(Protocol):
    """Work that follows a worker's Snapshots, after the worker's own work on each."""

    def take(self, snap: Snapshot) -> None:
        """One Snapshot, in order, on the sampler's thread; what it raises is logged and the next one taken.
        Work that may wait on the disk goes to the worker's thread through :meth:`SnapshotWorker.later`."""

    def finish(self) -> None:
        """The worker stopped: nothing more comes (close what it holds)."""


class SnapshotWorker:
    #: The worker thread's name, and what the log says once when the worker is stuck.
    thread_name = "gpuwatch-worker"
    stuck_warning = "a snapshot worker is stuck: its work is dropped"

    def __init__(self, store: Store, idle_s: float) -> None:
        self.store = store
        self.idle_s = idle_s
        self._jobs: queue.Queue[Job | None] = queue.Queue(maxsize=BACKLOG)
        #: Guards the subclass's state: the sampler's offers and the worker's idle work.
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: Jobs not done because the worker was stuck.
        self.dropped = 0
        #: ``time.monotonic()`` of the last offer: the worker's idle work waits for ``idle_s`` of silence.
        self._offered_at = time.monotonic()
        self._riders: list[Rider] = []

    def carry(self, rider: Rider) -> None:
        """``rider`` takes every Snapshot after this worker; it finishes when the worker stops."""
        self._riders.append(rider)

    @property
    def backlog(self) -> int:
        """Jobs waiting for the worker (0 while it keeps up)."""
        return self._jobs.qsize()

    def offer(self, snap: Snapshot) -> None:
        """Called on the sampler thread (the only producer): the worker's work on ``snap``, then each rider's."""
        self._offered_at = time.monotonic()
        with self._lock:
            try:
                self._take(snap)
            except Exception:
                log.exception("%s failed on a snapshot; skipping it", self.thread_name)
        for rider in self._riders:
            try:
                rider.take(snap)
            except Exception:
                log.exception("%r failed on a snapshot; skipping it", rider)

    def later(self, job: Job) -> None:
        """Run ``job`` on the worker thread, after those before it. A live daemon never fills the backlog; a
        replay at full speed can, and then waits for the worker. A worker stuck for PUT_TIMEOUT_S loses the
        job, counted."""
        try:
            self._jobs.put(job, timeout=PUT_TIMEOUT_S)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                log.warning(self.stuck_warning)

    def _take(self, snap: Snapshot) -> None:
        """The worker's own work on one Snapshot, under its lock, on the sampler's thread."""
        raise NotImplementedError

    def _idle(self) -> None:
        """On the worker thread, when no Snapshot came for ``idle_s`` (and then every ``idle_s``)."""

    def _finish(self) -> None:
        """On the worker thread, at the stop, after the last job."""

    def _run(self) -> None:
        while True:
            quiet = time.monotonic() - self._offered_at  # waits until idle_s of silence, then idle_s at a time
            try:
                job = self._jobs.get(timeout=self.idle_s - quiet if quiet < self.idle_s else self.idle_s)
            except queue.Empty:
                if time.monotonic() - self._offered_at >= self.idle_s:
                    self._idle()
                continue
            if job is None:
                break
            try:
                job()
            except Exception:
                log.exception("%s failed on a job; going on with the next", self.thread_name)
        self._finish()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Work through everything queued, then finish the riders and close the store."""
        self._jobs.put(None, timeout=30)
        if self._thread is not None:
            self._thread.join(timeout=30)
        for rider in self._riders:
            rider.finish()
        self.store.close()
