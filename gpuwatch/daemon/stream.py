"""Fan-out of snapshots to /api/v1/stream clients.

Each client has its own bounded queue, read by its connection's thread. Publishing never waits: when a
client's queue is full (a slow reader) its oldest entry is dropped, so one slow client can neither block
the sampler nor grow memory, and it always catches up to the newest snapshot. Each snapshot is serialised
once, not once per client. Clients come and go on their own threads, so the set of queues has a lock.
"""

from __future__ import annotations

import queue
import threading

from gpuwatch.model.codec import dumps
from gpuwatch.model.snapshot import Snapshot


class StreamHub:
    def __init__(self, maxsize: int = 16) -> None:
        self.maxsize = maxsize
        self._clients: set[queue.Queue[bytes | None]] = set()
        self._lock = threading.Lock()
        self.dropped = 0

    @property
    def clients(self) -> int:
        return len(self._clients)

    def subscribe(self, limit: int | None = None) -> queue.Queue[bytes | None] | None:
        """A new client's queue; None when ``limit`` clients are already subscribed."""
        with self._lock:
            if limit is not None and len(self._clients) >= limit:
                return None
            q: queue.Queue[bytes | None] = queue.Queue(maxsize=self.maxsize)
            self._clients.add(q)
            return q

    def unsubscribe(self, q: queue.Queue[bytes | None]) -> None:
        with self._lock:
            self._clients.discard(q)

    def publish(self, snap: Snapshot) -> None:
        """Call from one thread at a time (the event loop's)."""
        if not self._clients:
            return
        line = (dumps(snap) + "\n").encode("utf-8")
        with self._lock:
            clients = list(self._clients)
        for q in clients:
            self._put(q, line)

    def _put(self, q: queue.Queue[bytes | None], item: bytes | None) -> None:
        while True:
            try:
                q.put_nowait(item)
                return
            except queue.Full:
                try:
                    q.get_nowait()
                    self.dropped += 1
                except queue.Empty:
                    pass

    def close(self) -> None:
        """End every stream (the daemon is stopping)."""
        with self._lock:
            clients = list(self._clients)
        for q in clients:
            self._put(q, None)
