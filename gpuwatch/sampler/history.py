"""Fixed-memory history of recent Snapshots, and per-entity series read from it."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.sharing import share_unchanged


class History:
    """A ring buffer of the last ``capacity`` Snapshots (memory stays fixed however long it runs)."""

    def __init__(self, capacity: int = 3600) -> None:
        if capacity < 1:
            raise ValueError("history capacity must be at least 1")
        self._items: deque[Snapshot] = deque(maxlen=capacity)

    @property
    def capacity(self) -> int:
        return self._items.maxlen or 0

    def append(self, snap: Snapshot) -> None:
        """Keep ``snap``, sharing the values it repeats from the one before (``sampler/sharing.py``)."""
        share_unchanged(snap, self._items[-1] if self._items else None)
        self._items.append(snap)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Snapshot]:
        return iter(list(self._items))

    def latest(self) -> Snapshot | None:
        return self._items[-1] if self._items else None

    def since(self, t: float) -> list[Snapshot]:
        """Snapshots with ``time >= t``, oldest first."""
        out = []
        for snap in reversed(self._items):
            if snap.time < t:
                break
            out.append(snap)
        out.reverse()
        return out
