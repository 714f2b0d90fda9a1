"""The Prometheus collector: fresh metric families from the latest Snapshot on every scrape.

Nothing is kept between scrapes but counters (dropped process series, tick durations, and the byte
totals of :mod:`gpuwatch.exporter.totals`), so a GPU or process that disappears takes its series with it.
Values carry no timestamps: a replayed recording is exported as "now", which is what Prometheus accepts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import Metric

from gpuwatch.exporter.dcgm import dcgm_families
from gpuwatch.exporter.gpu import (
    catalogue_families,
    family,
    gpu_families,
    gpu_values,
    union_label_names,
    values_for,
)
from gpuwatch.exporter.processes import process_families, process_values, select
from gpuwatch.exporter.totals import RateTotals, Subject
from gpuwatch.model import series
from gpuwatch.model.alert import Alert
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot

CONTENT_TYPE = CONTENT_TYPE_LATEST
# The client's ``<name>_created`` series (a counter's or histogram's creation time) only double what
# Prometheus sees itself when a counter resets; they are off, as most exporters have them.
disable_created_metrics()
#: Which names GPU series carry: gpuwatch's, dcgm-exporter's, or both side by side.
NAME_SETS = ("gpuwatch", "dcgm", "both")
TICK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class SnapshotCollector:
    """A ``prometheus_client`` custom collector over ``latest()`` and ``alerts()``."""

    def __init__(self, latest: Callable[[], Snapshot | None],
                 alerts: Callable[[], Sequence[Alert]] = lambda: (),
                 max_process_series: int = 256,
                 extra: Callable[[], Iterable[Metric]] = lambda: (),
                 names: str = "gpuwatch",
                 findings: Callable[[], Sequence[Finding]] = lambda: (),
                 process_min_age: float = 0.0) -> None:
        if names not in NAME_SETS:
            raise ValueError(f"names must be one of {', '.join(NAME_SETS)}, got {names!r}")
        self.latest = latest
        self.names = names
        self.findings = findings
        self.alerts = alerts
        self.max_process_series = max_process_series
        self.process_min_age = process_min_age
        self.extra = extra
        #: Byte totals of the rates exported as counters; the daemon also feeds it every sampled Snapshot.
        self.totals = RateTotals(series_subjects)
        self._dropped_total = {"cap": 0, "young": 0}
        self._dropped_seq: int | None = None
        self._lock = threading.Lock()

    def set_process_limits(self, max_series: int, min_age: float) -> None:
        """A reload's cap on process series and the age a process needs before it gets series."""
        self.max_process_series, self.process_min_age = max_series, min_age

    def _count_dropped(self, snap: Snapshot | None, dropped: dict[str, int]) -> Metric:
        fam = family(series.PROCESS_SERIES_DROPPED)
        with self._lock:  # once per Snapshot, however often it is scraped
            if snap is not None and (self._dropped_seq != snap.seq or snap.seq == 0):
                self._dropped_seq = snap.seq
                for reason, n in dropped.items():
                    self._dropped_total[reason] += n
            for reason, total in sorted(self._dropped_total.items()):
                fam.add_metric([reason], float(total))
        return fam

    def collect(self) -> Iterator[Metric]:
        snap = self.latest()
        up = family(series.UP)
        up.add_metric([], 0.0 if snap is None else 1.0)
        yield up
        if snap is None:
            yield self._count_dropped(None, {})
            yield from self.extra()
            return
        self.totals.observe(snap)  # a no-op when the sampler has offered it already
        taken = family(series.SNAPSHOT_TIME)
        taken.add_metric([snap.origin], snap.time)
        age = family(series.SNAPSHOT_AGE)
        age.add_metric([], max(0.0, time.time() - snap.time) if not snap.is_recording else 0.0)
        yield from (taken, age)
        if self.names in ("gpuwatch", "both"):
            yield from gpu_families(snap, self.totals)
        if self.names in ("dcgm", "both"):
            yield from dcgm_families(snap)
        kept, left_out = select(snap.processes, self.max_process_series, snap.time, self.process_min_age)
        yield from process_families(snap, kept, self.totals)
        yield self._count_dropped(snap, left_out)
        host_info = family(series.HOST_INFO)
        host_info.add_metric([snap.host.hostname], 1.0)
        yield host_info
        yield from catalogue_families("host", [([], snap.host)])
        yield from _source_families(snap)
        yield from _alert_families(self.alerts())
        yield from _finding_families(self.findings())
        yield from self.extra()


def series_subjects(snap: Snapshot, scope: str) -> Iterator[tuple[tuple[str, ...], Subject]]:
    """Each GPU's or process's label values on /metrics, with the sample they come from."""
    if scope == "gpu":
        for g in snap.gpus:
            yield tuple(gpu_values(snap, g)), g
    elif scope == "process":
        for p in snap.processes:
            yield tuple(process_values(p, snap.host.hostname)), p


def _finding_families(findings: Sequence[Finding]) -> Iterator[Metric]:
    """The doctor's current findings, one series each (a finding on two processes of a GPU counts once)."""
    fam = family(series.DIAGNOSIS_FINDING)
    seen: set[tuple[str, str, str]] = set()
    for f in findings:
        labels = (f.code, f.severity, "" if f.gpu_index is None else str(f.gpu_index))
        if labels not in seen:
            seen.add(labels)
            fam.add_metric(list(labels), 1.0)
    yield fam


def _source_families(snap: Snapshot) -> Iterator[Metric]:
    up, age = family(series.SOURCE_UP), family(series.SOURCE_AGE)
    for s in snap.sources:
        up.add_metric([s.name], 1.0 if s.state == "ok" else 0.0)
        age.add_metric([s.name], s.age_s)
    yield from (up, age)


def _alert_families(alerts: Sequence[Alert]) -> Iterator[Metric]:
    """Pending and firing alerts, shaped like Prometheus' own ``ALERTS`` series."""
    active = [a for a in alerts if a.state in ("pending", "firing")]
    names = union_label_names((a.labels for a in active), exclude=(*series.ALERTS.labels, series.HOST_LABEL))
    fam = family(series.ALERTS, names)
    for a in active:
        fam.add_metric([a.name, a.state, *values_for(names, a.labels)], 1.0)
    yield fam


class Exporter:
    """One registry per daemon (tests build several side by side) holding the collector and the
    daemon's own instruments."""

    def __init__(self, collector: SnapshotCollector) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = collector
        self.registry.register(collector)
        self.tick_duration = Histogram(series.TICK_DURATION.name, series.TICK_DURATION.help,
                                       buckets=TICK_BUCKETS, registry=self.registry)

    def observe_tick(self, seconds: float) -> None:
        self.tick_duration.observe(seconds)


def render(registry: CollectorRegistry) -> bytes:
    """The text exposition of ``registry``: the body of GET /metrics."""
    return generate_latest(registry)
