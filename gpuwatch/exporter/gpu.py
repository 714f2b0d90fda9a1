"""Per-GPU metric families: the catalogue's GPU metrics in base units, one series per clock-event reason,
profiling counters per backend and identity, plus the family and label helpers the other families share.

Profiling (SM activity, occupancy, tensor, DRAM...): the catalogue name (``gpuwatch_gpu_sm_active_ratio``)
carries one series per GPU from the preferred backend (GPM, else DCGM) so alert rules match exactly one
series per GPU. ``gpuwatch_gpu_profiling_<field>_ratio{source="gpm"|"dcgm"}`` carries every backend's own
value, for comparing them when both run.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpuwatch.exporter.totals import RateTotals
from gpuwatch.model.clock_events import CLOCK_EVENT_BITS
from gpuwatch.model.metrics import METRICS, MetricSpec, Scope, as_value
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.series import BACKEND_FIELD, CLOCK_EVENT_ACTIVE, GPU_INFO, HOST_LABEL, PROFILING, Series, of_metric
from gpuwatch.model.snapshot import PROFILING_SOURCES, GpuSample, HostSample, Snapshot

_BAD = re.compile(r"[^a-zA-Z0-9_]")
CLOCK_REASONS = tuple(name for name, _ in CLOCK_EVENT_BITS.values())


def family(series: Series, extra_labels: Sequence[str] = ()) -> GaugeMetricFamily | CounterMetricFamily:
    """An empty family for ``series``, of the kind the catalogue says."""
    cls = CounterMetricFamily if series.kind == "counter" else GaugeMetricFamily
    return cls(series.family_name, series.help, labels=[*series.labels, *extra_labels])


@functools.cache
def exported(scope: Scope) -> tuple[tuple[MetricSpec, Series], ...]:
    """The catalogue metrics of ``scope`` that /metrics carries, each with its series (the catalogue is
    fixed: worked out on the first scrape, not on every one)."""
    return tuple((spec, of_metric(spec)) for spec in METRICS.values()
                 if spec.scope == scope and spec.prom_name is not None)


def catalogue_families(scope: Scope, subjects: Iterable[tuple[list[str], GpuSample | ProcessSample | HostSample]],
                       totals: RateTotals | None = None) -> Iterator[Metric]:
    """One family per exported catalogue metric of ``scope``, over (label values, subject) pairs; a rate
    the catalogue exports as a counter is its running total from ``totals`` (left out without them)."""
    subjects = list(subjects)
    for spec, series in exported(scope):
        fam = family(series)
        for values, subject in subjects:
            if spec.integrated:
                value = None if totals is None else totals.total(spec.key, tuple(values))
            else:
                value = as_value(spec.read(subject))
            if value is not None:
                fam.add_metric(values, value * spec.prom_scale)
        yield fam


def label_name(key: str) -> str:
    """A valid Prometheus label name for ``key`` (``app.kubernetes.io/name`` -> ``app_kubernetes_io_name``)."""
    name = _BAD.sub("_", key)
    if not name or name[0].isdigit():
        name = "_" + name
    if name.startswith("__"):
        name = "x" + name
    return name


def gpu_values(snap: Snapshot, gpu: GpuSample) -> list[str]:
    """Values of :data:`SERIES_GPU_LABELS`: join on ``uuid`` across hosts, read ``gpu`` (the index) on one
    host (``instance``), select by ``namespace``/``pod``/``container`` on Kubernetes."""
    identity = gpu.identity_labels(snap.host.hostname)
    return [*(v for k, v in identity.items() if k != HOST_LABEL), *gpu.pod_labels().values()]


def union_label_names(maps: Iterable[Mapping[str, str]], exclude: Iterable[str] = ()) -> list[str]:
    """Sorted union of the sanitised keys of ``maps``: one label set for a family whose members differ."""
    skip = set(exclude)
    names = {label_name(k) for m in maps for k in m}
    return sorted(names - skip)


def values_for(names: list[str], mapping: Mapping[str, str]) -> list[str]:
    clean = {label_name(k): v for k, v in mapping.items()}
    return [str(clean.get(n, "")) for n in names]


#: Each GPU with its label values (:func:`gpu_values`), worked out once a scrape.
Gpus = Sequence[tuple[list[str], GpuSample]]


def _clock_events(gpus: Gpus) -> Iterator[Metric]:
    fam = family(CLOCK_EVENT_ACTIVE)
    for values, gpu in gpus:
        if not gpu.clock_events_known:
            continue  # unknown is not "no reason": leave the series out
        active = gpu.active_clock_events
        for reason in (*CLOCK_REASONS, *sorted(active - set(CLOCK_REASONS))):
            fam.add_metric([*values, reason], 1.0 if reason in active else 0.0)
    yield fam


def _profiling(gpus: Gpus) -> Iterator[Metric]:
    for field_name, series in PROFILING.items():
        fam = family(series)
        for values, gpu in gpus:
            for source in PROFILING_SOURCES:
                prof = gpu.profiling.get(source)
                value = None if prof is None else getattr(prof, field_name)
                if value is not None and value == value:
                    fam.add_metric([*values, source], float(value) / 100.0)
        yield fam


def _identity(gpus: Gpus) -> Iterator[Metric]:
    extra = union_label_names((g.labels for _, g in gpus), exclude=GPU_INFO.labels)
    info = family(GPU_INFO, extra)
    for values, gpu in gpus:
        info.add_metric([*values, gpu.pci_bus_id or "", gpu.driver_version or "", *values_for(extra, gpu.labels)], 1)
    yield info


def _extras(gpus: Gpus) -> Iterator[Metric]:
    """Backend fields the model has no slot for (e.g. DCGM XID errors), one family keyed by ``field``."""
    fam = family(BACKEND_FIELD)
    for values, gpu in gpus:
        for key, value in sorted(gpu.extra.items()):
            if value == value:
                fam.add_metric([*values, label_name(key)], float(value))
    yield fam


def gpu_families(snap: Snapshot, totals: RateTotals | None = None) -> Iterator[Metric]:
    gpus = [(gpu_values(snap, g), g) for g in snap.gpus]
    yield from catalogue_families("gpu", gpus, totals)
    yield from _clock_events(gpus)
    yield from _profiling(gpus)
    yield from _identity(gpus)
    yield from _extras(gpus)
