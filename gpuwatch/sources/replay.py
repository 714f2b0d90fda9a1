"""Replay a recording as if it were live: at recorded speed, faster, or as fast as possible, optionally
looping. Snapshots come out with ``origin='recording:<file>'`` so every consumer can label them."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

from gpuwatch.model.recording import iter_snapshots, read_header, recording_span
from gpuwatch.model.snapshot import Snapshot

#: A GPU at this GPU-Util or more is busy: where a live view of a recording with an idle lead-in starts.
BUSY_PERCENT = 5.0
#: Leading snapshots looked at for the first busy one; a recording idle for longer plays from its start.
IDLE_LEAD_LIMIT = 120


class ReplayProducer:
    """A Producer over a recording. ``speed`` 1 = recorded pace, 10 = ten times faster, 0 = no waiting.

    ``skip_idle``: the first pass starts at the first snapshot in which a GPU is busy (``skipped_s`` says how
    far in). The skipped snapshots are never produced, so no history, window, verdict or GPU-hour of a
    consumer comes from seconds its viewer was not shown."""

    def __init__(self, path: str | os.PathLike[str], *, speed: float = 1.0, loop: bool = False,
                 start_s: float = 0.0, skip_idle: bool = False) -> None:
        self.path = Path(path)
        self.header = read_header(self.path)  # fail early, with file and line, on a bad file
        self.speed = speed
        self.loop = loop
        self.skipped_s = _idle_lead_s(self.path) if skip_idle else 0.0
        self.start_s = max(start_s, self.skipped_s)
        self.origin = f"recording:{self.path.name}"
        self._iter: Iterator[Snapshot] = self._snapshots()
        self._prev_time: float | None = None
        self._seq = 0

    def _snapshots(self) -> Iterator[Snapshot]:
        shift = 0.0
        while True:
            first: float | None = None
            last = 0.0
            count = 0
            for snap in iter_snapshots(self.path):
                if first is None:
                    first = snap.time
                last = snap.time
                if snap.time - first < self.start_s and shift == 0.0:
                    continue
                count += 1
                yield dataclasses.replace(snap, time=snap.time + shift)
            if not self.loop or count == 0 or first is None:
                return
            shift += (last - first) + self.header.interval_s

    def period(self) -> float:
        """Seconds one pass of a looping replay covers (its last time less its first, and one interval), read
        from the file's times alone; 0 for an empty recording."""
        first, last = recording_span(self.path)
        return 0.0 if first is None else (last - first) + self.header.interval_s

    def collect(self) -> Snapshot | None:
        snap = next(self._iter, None)
        if snap is None:
            return None
        self._seq += 1
        return dataclasses.replace(snap, origin=self.origin, seq=self._seq)

    def delay_after(self, snap: Snapshot) -> float:
        prev, self._prev_time = self._prev_time, snap.time
        if self.speed <= 0:
            return 0.0
        step = self.header.interval_s if prev is None else max(0.0, snap.time - prev)
        return step / self.speed

    def close(self) -> None:
        self._iter = iter(())


def _idle_lead_s(path: Path) -> float:
    """Seconds from the recording's first snapshot to its first busy one (0: busy at once, or idle too long)."""
    first: float | None = None
    for i, snap in enumerate(iter_snapshots(path)):
        first = snap.time if first is None else first
        if any((g.gpu_util or 0.0) >= BUSY_PERCENT for g in snap.gpus):
            return snap.time - first
        if i >= IDLE_LEAD_LIMIT:
            break
    return 0.0
