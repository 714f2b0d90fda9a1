"""Per-process metric families with a cap on how many processes are exported.

A host running hundreds of short-lived workers would otherwise make /metrics (and Prometheus' index)
grow without bound. The biggest GPU-memory holders are kept; the rest are counted in
``gpuwatch_process_series_dropped_total``. Series are rebuilt every scrape, so a process that exits
leaves no stale series behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from gpuwatch.model.metrics import METRICS, read_metric
from gpuwatch.model.snapshot import PROCESS_LABELS, ProcessSample, Snapshot


def _rank(p: ProcessSample) -> tuple[float, float, int]:
    return (-(p.gpu_memory_bytes or 0), -(p.sm_util or 0.0), p.pid)


def select(processes: Sequence[ProcessSample], cap: int) -> tuple[list[ProcessSample], int]:
    """The ``cap`` processes to export (largest GPU memory first) and how many were left out."""
    if len(processes) <= cap:
        return list(processes), 0
    ranked = sorted(processes, key=_rank)
    return ranked[:cap], len(processes) - cap


def process_families(snap: Snapshot, kept: Sequence[ProcessSample]) -> Iterator[Metric]:
    for spec in METRICS.values():
        if spec.scope != "process" or spec.prom_name is None:
            continue
        family = GaugeMetricFamily(spec.prom_name, f"{spec.help} ({spec.key})", labels=PROCESS_LABELS)
        for p in kept:
            value = read_metric(spec.key, p)
            if value is not None:
                family.add_metric(list(p.identity_labels(snap.host.hostname).values()), value * spec.prom_scale)
        yield family
    count = GaugeMetricFamily("gpuwatch_gpu_processes", "processes using each GPU (before the export cap)",
                              labels=["gpu", "hostname"])
    for gpu in snap.gpus:
        count.add_metric([str(gpu.index), snap.host.hostname], len(snap.processes_on(gpu.index)))
    yield count
