"""Per-GPU metric families: the catalogue's GPU metrics in base units, one series per clock-event reason,
profiling counters per backend and identity, plus the family and label helpers the other families share.

Profiling (SM activity, occupancy, tensor, DRAM...): the catalogue name (``gpuwatch_gpu_sm_active_ratio``)
carries one series per GPU from the preferred backend (GPM, else DCGM) so alert rules match exactly one
series per GPU. ``gpuwatch_gpu_profiling_<field>_ratio{source="gpm"|"dcgm"}`` carries every backend's own
value, for comparing them when both run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpuwatch.exporter.totals import RateTotals
from gpuwatch.model.clock_events import CLOCK_EVENT_BITS
from gpuwatch.model.metrics import METRICS, Scope, read_metric
from gpuwatch.model.series import BACKEND_FIELD, CLOCK_EVENT_ACTIVE, GPU_INFO, HOST_LABEL, PROFILING, Series, of_metric
from gpuwatch.model.snapshot import PROFILING_SOURCES, GpuSample, HostSample, ProcessSample, Snapshot

_BAD = re.compile(r"[^a-zA-Z0-9_]")
CLOCK_REASONS = tuple(name for name, _ in CLOCK_EVENT_BITS.values())


def family(series: Series, extra_labels: Sequence[str] = ()) -> GaugeMetricFamily | CounterMetricFamily:
    """An empty family for ``series``, of the kind the catalogue says."""
    cls = CounterMetricFamily if series.kind == "counter" else GaugeMetricFamily
    return cls(series.family_name, series.help, labels=[*series.labels, *extra_labels])


def catalogue_families(scope: Scope, subjects: Iterable[tuple[list[str], GpuSample | ProcessSample | HostSample]],
                       totals: RateTotals | None = None) -> Iterator[Metric]:
    """One family per exported catalogue metric of ``scope``, over (label values, subject) pairs; a rate
    the catalogue exports as a counter is its running total from ``totals`` (left out without them)."""
    subjects = list(subjects)
    for spec in METRICS.values():
        if spec.scope == scope and spec.prom_name is not None:
            fam = family(of_metric(spec))
            for values, subject in subjects:
                if spec.integrated:
                    value = None if totals is None else totals.total(spec.key, tuple(values))
                else:
                    value = read_metric(spec.key, subject)
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


def _clock_events(snap: Snapshot) -> Iterator[Metric]:
    fam = family(CLOCK_EVENT_ACTIVE)
    for gpu in snap.gpus:
        if not gpu.clock_events_known:
            continue  # unknown is not "no reason": leave the series out
        active = gpu.active_clock_events
        for reason in (*CLOCK_REASONS, *sorted(active - set(CLOCK_REASONS))):
            fam.add_metric([*gpu_values(snap, gpu), reason], 1.0 if reason in active else 0.0)
    yield fam


def _profiling(snap: Snapshot) -> Iterator[Metric]:
    for field_name, series in PROFILING.items():
        fam = family(series)
        for gpu in snap.gpus:
            for source in PROFILING_SOURCES:
                prof = gpu.profiling.get(source)
                value = None if prof is None else getattr(prof, field_name)
                if value is not None and value == value:
                    fam.add_metric([*gpu_values(snap, gpu), source], float(value) / 100.0)
        yield fam


def _identity(snap: Snapshot) -> Iterator[Metric]:
    extra = union_label_names((g.labels for g in snap.gpus), exclude=GPU_INFO.labels)
    info = family(GPU_INFO, extra)
    for gpu in snap.gpus:
        info.add_metric([*gpu_values(snap, gpu), gpu.pci_bus_id or "", gpu.driver_version or "",
                         *values_for(extra, gpu.labels)], 1)
    yield info


def _extras(snap: Snapshot) -> Iterator[Metric]:
    """Backend fields the model has no slot for (e.g. DCGM XID errors), one family keyed by ``field``."""
    fam = family(BACKEND_FIELD)
    for gpu in snap.gpus:
        for key, value in sorted(gpu.extra.items()):
            if value == value:
                fam.add_metric([*gpu_values(snap, gpu), label_name(key)], float(value))
    yield fam


def gpu_families(snap: Snapshot, totals: RateTotals | None = None) -> Iterator[Metric]:
    yield from catalogue_families("gpu", ((gpu_values(snap, g), g) for g in snap.gpus), totals)
    yield from _clock_events(snap)
    yield from _profiling(snap)
    yield from _identity(snap)
    yield from _extras(snap)
