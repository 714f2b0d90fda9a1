"""Running byte totals for the rates the sources measure (PCIe throughput, a process's storage I/O).

Prometheus wants bytes moved as a counter (``..._bytes_total``) and computes rates itself with ``rate()``
over whatever window a query asks for; a gauge of "bytes per second right now" only holds the rate over
one sampling interval and loses what happened between scrapes. The sources give rates, so the total is
their integral over Snapshot time: every Snapshot adds ``rate x (its time - the previous one's)``. Each
Snapshot counts once however often it is offered (the sampler offers every one; a scrape offers the
latest too), and a GPU or process that disappears takes its total with it: one that comes back starts
at 0 again, which ``rate()`` reads as a counter reset.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from gpuwatch.model.metrics import METRICS, MetricSpec, read_metric
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Snapshot

Subject = GpuSample | ProcessSample | HostSample
#: (label values of the series) -> subject, for one scope of a Snapshot; the exporter's own label values.
Subjects = Callable[[Snapshot, str], Iterator[tuple[tuple[str, ...], Subject]]]
INTEGRATED: tuple[MetricSpec, ...] = tuple(m for m in METRICS.values() if m.integrated)


class RateTotals:
    """Totals keyed by (metric key, label values); thread-safe (the sampler adds, scrapes read)."""

    def __init__(self, subjects: Subjects) -> None:
        self._subjects = subjects
        self._totals: dict[tuple[str, tuple[str, ...]], float] = {}
        self._last_time: float | None = None
        self._lock = threading.Lock()

    def observe(self, snap: Snapshot) -> None:
        """Add ``snap``'s rates over the time since the previous Snapshot (once per Snapshot)."""
        with self._lock:
            if self._last_time is not None and snap.time <= self._last_time:
                return  # seen already (or older: a replay that started over keeps its totals)
            dt = 0.0 if self._last_time is None else snap.time - self._last_time
            self._last_time = snap.time
            seen: dict[tuple[str, tuple[str, ...]], float] = {}
            by_scope: dict[str, list[tuple[tuple[str, ...], Subject]]] = {}  # labels built once per scope
            for spec in INTEGRATED:
                if spec.scope not in by_scope:
                    by_scope[spec.scope] = list(self._subjects(snap, spec.scope))
                for values, subject in by_scope[spec.scope]:
                    key = (spec.key, values)
                    total = self._totals.get(key)
                    rate = read_metric(spec.key, subject)
                    if total is None:  # first seen: counting starts now
                        seen[key] = 0.0
                    else:
                        seen[key] = total + (rate * dt if rate is not None and rate >= 0 else 0.0)
            self._totals = seen

    def total(self, key: str, values: tuple[str, ...]) -> float | None:
        """Bytes so far for one series, None for a subject not seen yet."""
        with self._lock:
            return self._totals.get((key, values))
