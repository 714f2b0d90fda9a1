"""Snapshots handed from the sampler thread to a worker thread, in order, with a bounded backlog.

The accounting works on every Snapshot off the sampler's thread: :meth:`SnapshotWorker.offer` only queues,
the subclass's ``_run`` takes them in order (``None`` is the stop), and :meth:`SnapshotWorker.stop` lets it
finish what is queued before the store is closed. Other work on every Snapshot rides the same thread
(:class:`Rider`: the rollout detector): one wake-up a tick for both rather than one each, where a thread
woken once a second to run cold code spends more on the waking and the cold start than on the work.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Protocol

from gpuwatch.efficiency.store import Store
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)

#: Snapshots waiting for the worker at most, as the alert worker's: a bound on the backlog's memory (about
#: 2 MiB of 2-GPU, 8-process snapshots; a full-speed replay that outruns the worker then waits for it).
BACKLOG = 256
PUT_TIMEOUT_S = 5.0


class Rider(Protocol):
    """Work that follows a worker's Snapshots on its thread, after the worker's own work on each."""

    def take(self, snap: Snapshot) -> None:
        """One Snapshot, in order; what it raises is logged and the next one taken."""

    def finish(self) -> None:
        """The worker stopped: nothing more comes (close what it holds)."""


class SnapshotWorker:
    #: The worker thread's name, and what the log says once when the worker is stuck.
    thread_name = "gpuwatch-worker"
    stuck_warning = "a snapshot worker is stuck: snapshots are skipped"

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: queue.Queue[Snapshot | None] = queue.Queue(maxsize=BACKLOG)
        self._thread: threading.Thread | None = None
        #: Snapshots not worked on because the worker was stuck.
        self.dropped = 0
        self._riders: list[Rider] = []

    def carry(self, rider: Rider) -> None:
        """``rider`` takes every Snapshot after this worker, on its thread; it finishes when the worker stops."""
        self._riders.append(rider)

    def _ride(self, snap: Snapshot) -> None:
        for rider in self._riders:
            try:
                rider.take(snap)
            except Exception:
                log.exception("%r failed on a snapshot; skipping it", rider)

    def offer(self, snap: Snapshot) -> None:
        """Called on the sampler thread (the only producer). A live sampler never fills the backlog (a snapshot
        a second against a worker that takes a millisecond); a replay at full speed does, and then waits for
        the worker, so the backlog's memory stays bounded. A worker stuck for PUT_TIMEOUT_S loses the
        snapshot, counted."""
        try:
            self._queue.put(snap, timeout=PUT_TIMEOUT_S)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1:
                log.warning(self.stuck_warning)

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Work through everything queued, then finish the riders and close the store."""
        self._queue.put(None, timeout=30)
        if self._thread is not None:
            self._thread.join(timeout=30)
        for rider in self._riders:
            rider.finish()
        self.store.close()
