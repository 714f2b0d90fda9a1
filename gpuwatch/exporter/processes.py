"""Per-process metric families with a cap on how many processes are exported.

A host running hundreds of short-lived workers would otherwise make /metrics (and Prometheus' index)
grow without bound. The biggest GPU-memory holders are kept; the rest are counted in
``gpuwatch_process_series_dropped_total``. Series are rebuilt every scrape, so a process that exits
leaves no stale series behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import Metric

from gpuwatch.exporter.gpu import catalogue_families, family
from gpuwatch.model.series import GPU_PROCESSES, HOST_LABEL
from gpuwatch.model.snapshot import ProcessSample, Snapshot


def _rank(p: ProcessSample) -> tuple[float, float, int]:
    return (-(p.gpu_memory_bytes or 0), -(p.sm_util or 0.0), p.pid)


def select(processes: Sequence[ProcessSample], cap: int) -> tuple[list[ProcessSample], int]:
    """The ``cap`` processes to export (largest GPU memory first) and how many were left out."""
    if len(processes) <= cap:
        return list(processes), 0
    ranked = sorted(processes, key=_rank)
    return ranked[:cap], len(processes) - cap


def process_values(p: ProcessSample, host: str) -> list[str]:
    """Values of :data:`SERIES_PROCESS_LABELS`."""
    identity = p.identity_labels(host)
    return [*(v for k, v in identity.items() if k != HOST_LABEL), *p.pod_labels().values(), p.container_id or ""]


def process_families(snap: Snapshot, kept: Sequence[ProcessSample]) -> Iterator[Metric]:
    host = snap.host.hostname
    yield from catalogue_families("process", ((process_values(p, host), p) for p in kept))
    count = family(GPU_PROCESSES)
    for gpu in snap.gpus:
        count.add_metric([str(gpu.index)], len(snap.processes_on(gpu.index)))
    yield count
