"""Fan-out of snapshots to /api/v1/stream clients.

Each client has its own bounded queue. Publishing never waits: when a client's queue is full (a slow
reader) its oldest entry is dropped, so one slow client can neither block the sampler nor grow memory,
and it always catches up to the newest snapshot. Each snapshot is serialised once, not once per client.
"""

from __future__ import annotations

import asyncio

from gpuwatch.model.codec import dumps
from gpuwatch.model.snapshot import Snapshot


class StreamHub:
    def __init__(self, maxsize: int = 16) -> None:
        self.maxsize = maxsize
        self._clients: set[asyncio.Queue[bytes | None]] = set()
        self.dropped = 0

    @property
    def clients(self) -> int:
        return len(self._clients)

    def subscribe(self) -> asyncio.Queue[bytes | None]:
        q: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=self.maxsize)
        self._clients.add(q)
        return q

    def unsubscribe(self, q: asyncio.Queue[bytes | None]) -> None:
        self._clients.discard(q)

    def publish(self, snap: Snapshot) -> None:
        """Call on the event loop."""
        if not self._clients:
            return
        line = (dumps(snap) + "\n").encode("utf-8")
        for q in self._clients:
            self._put(q, line)

    def _put(self, q: asyncio.Queue[bytes | None], item: bytes | None) -> None:
        while True:
            try:
                q.put_nowait(item)
                return
            except asyncio.QueueFull:
                try:
                    q.get_nowait()
                    self.dropped += 1
                except asyncio.QueueEmpty:
                    pass

    def close(self) -> None:
        """End every stream (the daemon is stopping)."""
        for q in list(self._clients):
            self._put(q, None)
