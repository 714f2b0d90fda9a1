"""``gpuwatch_gpu_seconds_total`` and ``gpuwatch_gpu_lost_seconds_total`` for /metrics.

Counters since the daemon started, of the same intervals the roll-ups are (so ``increase()`` over an hour
in Prometheus and the hour's roll-up agree). The GPU-seconds by state advance at every tick, so
``rate()`` over a minute reads 1 per GPU, not a 10-second staircase; the lost seconds wait for their
block's cause and advance when it is written. Series per GPU: 4 for the states, plus one per
(cause, owner) that has lost time on it: at most ``len(CAUSES)`` causes times the owners named, capped by
the accounting's one owner cap (:class:`~gpuwatch.efficiency.rows.OwnerCap`, ``daemon.max_process_series``
owners, then ``command="(other)"``) over the daemon's life, as a counter keeps every series it served (the
roll-ups apply the same cap over each hour).
Owners are pods or (user, command) pairs, not pids, so a host starting thousands of short-lived workers of
one program adds one owner.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from prometheus_client.core import Metric

from gpuwatch.efficiency.account import GpuInterval
from gpuwatch.efficiency.ledger import Increment
from gpuwatch.efficiency.rows import MAX_OWNERS, Owner, OwnerCap, States
from gpuwatch.exporter.gpu import family
from gpuwatch.model.causes import STATES
from gpuwatch.model.series import GPU_LOST_SECONDS, GPU_SECONDS


class Totals:
    """Running totals of the committed increments, safe to read from the scrape thread."""

    def __init__(self, max_owners: int = MAX_OWNERS) -> None:
        self._owners = OwnerCap(max_owners)
        self._lock = threading.Lock()
        self.seconds: dict[int, States] = {}
        self.lost: dict[tuple[int, str, Owner], float] = {}

    def add(self, inc: Increment) -> None:
        """A committed block, its GPU-seconds and its lost seconds (where no tick added the former)."""
        with self._lock:
            for at, states in inc.seconds.items():
                self.seconds[at.gpu] = self.seconds.get(at.gpu, States()).plus(states)
        self.add_lost(inc)

    def add_tick(self, ticked: Sequence[GpuInterval]) -> None:
        """One tick's GPU intervals, as they are watched (the block's cause is not known yet)."""
        with self._lock:
            for iv in ticked:
                self.seconds[iv.gpu] = self.seconds.get(iv.gpu, States()).plus(
                    States(iv.observed, iv.allocated, iv.busy, iv.effective))

    def add_lost(self, inc: Increment) -> None:
        """A written block's lost seconds by cause and owner."""
        with self._lock:
            for k, seconds in inc.lost.items():
                key = (k.gpu, k.cause, self._owners(k.owner))
                self.lost[key] = self.lost.get(key, 0.0) + seconds

    def families(self) -> Iterator[Metric]:
        seconds, lost = family(GPU_SECONDS), family(GPU_LOST_SECONDS)
        with self._lock:
            for gpu, states in sorted(self.seconds.items()):
                for state, value in zip(STATES, states, strict=True):
                    seconds.add_metric([str(gpu), state], value)
            for (gpu, cause, owner), value in sorted(self.lost.items()):
                lost.add_metric([str(gpu), cause, *owner], value)
        yield seconds
        yield lost


class TotalsCollector:
    """A registry collector over :class:`Totals` (both families always present, empty before a commit)."""

    def __init__(self, totals: Totals) -> None:
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        yield from self.totals.families()
