"""From the sampler thread to everything the daemon serves: latest snapshot, streams, alerts, notifier.

The sampler calls :meth:`Pipeline.offer` on its own thread. That never waits: it appends the snapshot
to two bounded queues and returns.
  * The event loop drains the first (one ``call_soon_threadsafe`` per burst, not per snapshot) to update
    the latest snapshot and feed /api/v1/stream clients. With no stream client, the snapshot becomes the
    latest on the sampler thread and the loop is not woken at all.
  * The alert worker thread drains the second: rules and the notifier's SQLite writes, one snapshot at a
    time and in order, independent of how busy the event loop is. Once it has worked through the queue it
    lets the next :data:`GATHER_MAX` snapshots gather (for two and a half intervals at most) and takes them
    together: one wake-up for two ticks, the second evaluated while the rules' code is still warm.
When either falls behind (a replay at full speed), the oldest waiting snapshot is skipped and counted
rather than memory growing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TypeVar

from gpuwatch.alerts import AlertEngine
from gpuwatch.daemon.stream import StreamHub
from gpuwatch.model.alert import Alert
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.notify import Notifier

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Snapshots the alert worker lets gather after it emptied its queue before it wakes: in a 1 s daemon the
#: wake-up and the rules' code run cold cost more than the second snapshot's evaluation. An alert and its
#: notification then come up to one interval later than the snapshot that changed it; Prometheus evaluates
#: its rules once a minute by default (15 s in most setups), and the shipped rules hold for minutes before
#: they fire. Every snapshot is still evaluated, in order, at its own time: the alerts are the same.
GATHER_MAX = 2
#: The gathering ends after this many of the last intervals between snapshots (a stream that ended, a
#: sampler that stalls: what came is evaluated at once), and after GATHER_S seconds at most.
GATHER_INTERVALS = 2.5
GATHER_S = 5.0


class Pipeline:
    """Built with the daemon's other parts; :meth:`start` binds it to the event loop once that runs."""

    def __init__(self, engine: AlertEngine, hub: StreamHub, notifier: Notifier | None = None,
                 on_queued: Callable[[], None] = lambda: None, backlog: int = 256) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.engine = engine
        self.hub = hub
        self.notifier = notifier
        self.on_queued = on_queued
        self.latest: Snapshot | None = None
        self.alerts: Sequence[Alert] = ()
        self.received = 0
        #: ``time.monotonic()`` of the last snapshot received (for /healthz and the watchdog).
        self.last_received = 0.0
        self.evaluated = 0
        self.skipped = 0
        self.evaluation_failures = 0
        #: Why the last evaluation failed (None once one succeeds): /healthz and the watchdog read it.
        self.evaluation_error: str | None = None
        self._logged_errors: set[str] = set()
        self.first_snapshot = asyncio.Event()
        self._backlog = backlog
        self._inbox: deque[Snapshot] = deque()
        self._scheduled = False
        self._pending: deque[Snapshot] = deque()
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._engine_lock = threading.Lock()
        self._stopping = False
        #: The alert worker is letting snapshots gather: offer() wakes it only once GATHER_MAX wait.
        self._gathering = False
        #: ``time.monotonic()`` of the last offer and the interval before it: how long a gathering may wait.
        self._offered_at: float | None = None
        self._gap = 0.0
        self._worker = threading.Thread(target=self._evaluate_loop, name="gpuwatch-alerts", daemon=True)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve from ``loop`` and start the alert worker; before this, nothing is evaluated."""
        self.loop = loop
        self._worker.start()

    def offer(self, snap: Snapshot) -> None:
        """Sampler thread: hand a snapshot over without waiting. The event loop is woken only when it has
        something to do with it (stream clients to feed, the first snapshot to announce): otherwise the
        snapshot becomes the latest here, and an idle daemon's loop sleeps between scrapes."""
        with self._lock:
            if len(self._pending) >= self._backlog:
                self._pending.popleft()
                self.skipped += 1
            self._pending.append(snap)
            now = time.monotonic()
            if self._offered_at is not None:
                self._gap = now - self._offered_at
            self._offered_at = now
            if not self._gathering or len(self._pending) >= GATHER_MAX:
                self._work.notify()
            if not self._scheduled and self.first_snapshot.is_set() and not self.hub.clients:
                self._take(snap)
                self.last_received = time.monotonic()
                return
            if len(self._inbox) >= self._backlog:
                self._inbox.popleft()
                self.skipped += 1
            self._inbox.append(snap)
            if self._scheduled:
                return
            self._scheduled = True
        self._on_loop(self._drain)

    def _take(self, snap: Snapshot) -> None:
        self.latest = snap
        self.received += 1

    def _drain(self) -> None:
        with self._lock:
            items = list(self._inbox)
            self._inbox.clear()
            self._scheduled = False
        for snap in items:
            self._take(snap)
            self.hub.publish(snap)
        if items:
            self.last_received = time.monotonic()
            self.first_snapshot.set()

    def _evaluate_loop(self) -> None:
        while True:
            with self._work:
                while not self._pending and not self._stopping:
                    self._work.wait()
                if self._stopping:
                    return
                batch = list(self._pending)
                self._pending.clear()
            for snap in batch:
                if self._stopping:
                    return
                self._evaluate(snap)
            with self._work:  # let the next ones gather (close() and a full batch end it at once)
                self._gathering = True
                self._work.wait_for(lambda: self._stopping or len(self._pending) >= GATHER_MAX,
                                    min(GATHER_S, GATHER_INTERVALS * self._gap))
                self._gathering = False

    def _evaluate(self, snap: Snapshot) -> None:
        try:
            with self._engine_lock:
                transitions = self.engine.evaluate(snap)
                self.alerts = self.engine.alerts()
                queued = self.notifier.handle(transitions, self.alerts, snap.time) if self.notifier else 0
        except Exception as exc:
            self.evaluation_failures += 1
            error = self.evaluation_error = f"{type(exc).__name__}: {exc}"[:300]
            if error not in self._logged_errors and len(self._logged_errors) < 100:  # once per distinct error
                self._logged_errors.add(error)
                log.exception("alert evaluation failed for snapshot %d; going on with the next", snap.seq)
            return
        self.evaluated += 1
        self.evaluation_error = None
        if queued:
            self._on_loop(self.on_queued)

    def _on_loop(self, fn: Callable[[], None]) -> None:
        try:
            if self.loop is not None:
                self.loop.call_soon_threadsafe(fn)
        except RuntimeError:  # the loop closed: the daemon is stopping
            pass

    def _locked(self, fn: Callable[[], T]) -> T:
        with self._engine_lock:
            return fn()

    async def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` between two evaluations (rule reloads), without blocking the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, self._locked, fn)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the alert worker after the batch in hand (the rest of the backlog is dropped)."""
        with self._work:
            self._stopping = True
            self._work.notify()
        if self._worker.is_alive():
            self._worker.join(timeout)
