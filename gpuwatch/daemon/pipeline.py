"""From the sampler thread to everything the daemon serves: latest snapshot, streams, alerts, notifier.

The sampler calls :meth:`Pipeline.offer` on its own thread; that only appends to a bounded inbox and,
when needed, schedules one drain on the event loop (``call_soon_threadsafe``), so the sampler never
waits on the daemon and a burst (a fast replay) cannot flood the loop. Alert rules and the notifier's
SQLite writes run on one worker thread, one snapshot at a time and in order; when they fall behind,
the oldest waiting snapshot is skipped and counted rather than memory growing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from gpuwatch.daemon.stream import StreamHub
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)


class Engine(Protocol):
    def evaluate(self, snapshot: Snapshot) -> list[Any]: ...

    def alerts(self) -> list[Any]: ...

    def replace_rules(self, rules: Any) -> None: ...


class Handler(Protocol):
    def handle(self, transitions: Any, active: Any, now: float) -> int: ...


class Pipeline:
    def __init__(self, loop: asyncio.AbstractEventLoop, engine: Engine, hub: StreamHub,
                 notifier: Handler | None = None, on_queued: Callable[[], None] = lambda: None,
                 backlog: int = 256) -> None:
        self.loop = loop
        self.engine = engine
        self.hub = hub
        self.notifier = notifier
        self.on_queued = on_queued
        self.latest: Snapshot | None = None
        self.alerts: Sequence[Any] = ()
        self.received = 0
        #: ``time.monotonic()`` of the last snapshot received (for /healthz and the watchdog).
        self.last_received = 0.0
        self.evaluated = 0
        self.skipped = 0
        self.first_snapshot = asyncio.Event()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuwatch-alerts")
        self._inbox: deque[Snapshot] = deque()
        self._backlog = backlog
        self._lock = threading.Lock()
        self._scheduled = False
        self._pending: deque[Snapshot] = deque()
        self._wake = asyncio.Event()

    def offer(self, snap: Snapshot) -> None:
        """Sampler thread: hand a snapshot over without waiting."""
        with self._lock:
            if len(self._inbox) >= self._backlog:
                self._inbox.popleft()
                self.skipped += 1
            self._inbox.append(snap)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop closed: the daemon is stopping
            pass

    def _drain(self) -> None:
        with self._lock:
            items = list(self._inbox)
            self._inbox.clear()
            self._scheduled = False
        for snap in items:
            self.latest = snap
            self.received += 1
            self.hub.publish(snap)
            if len(self._pending) >= self._backlog:
                self._pending.popleft()
                self.skipped += 1
            self._pending.append(snap)
        if items:
            self.last_received = time.monotonic()
            self.first_snapshot.set()
            self._wake.set()

    def _evaluate(self, snap: Snapshot) -> tuple[list[Any], int]:
        transitions = self.engine.evaluate(snap)
        alerts = self.engine.alerts()
        queued = self.notifier.handle(transitions, alerts, snap.time) if self.notifier is not None else 0
        return alerts, queued

    async def run(self, stop: asyncio.Event) -> None:
        """Evaluate waiting snapshots in order until ``stop``; finishes the one in hand."""
        while not stop.is_set():
            if not self._pending:
                self._wake.clear()
                waiters = [asyncio.ensure_future(self._wake.wait()), asyncio.ensure_future(stop.wait())]
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                for w in waiters:
                    w.cancel()
                continue
            snap = self._pending.popleft()
            try:
                self.alerts, queued = await self.loop.run_in_executor(self.executor, self._evaluate, snap)
            except Exception:
                log.exception("alert evaluation failed for snapshot %d; going on with the next", snap.seq)
                continue
            self.evaluated += 1
            if queued:
                self.on_queued()

    async def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the alert worker thread, between two evaluations (rule reloads)."""
        return await self.loop.run_in_executor(self.executor, fn)

    def close(self) -> None:
        self.executor.shutdown(wait=True)
