"""Per-process metric families with a cap on how many processes are exported.

Every process is a new set of series in Prometheus (its ``pid`` is a label), and they stay in its index
after the process is gone: a host running hundreds of short-lived workers would grow it without bound.
Two limits bound that churn: a process is exported once it has run ``process_series_min_age`` (30 s by
default; a process of unknown age counts as old), and at most ``max_process_series`` at once, the
biggest GPU-memory holders first. What either leaves out is counted in
``gpuwatch_process_series_dropped_total{reason="young"|"cap"}``. Series are rebuilt every scrape, so a
process that exits leaves no stale series behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import Metric

from gpuwatch.exporter.gpu import catalogue_families, family
from gpuwatch.exporter.totals import RateTotals
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.series import GPU_PROCESSES, HOST_LABEL
from gpuwatch.model.snapshot import Snapshot


def _rank(p: ProcessSample) -> tuple[float, float, int]:
    return (-(p.gpu_memory_bytes or 0), -(p.sm_util or 0.0), p.pid)


def select(processes: Sequence[ProcessSample], cap: int, now: float = 0.0, min_age: float = 0.0
           ) -> tuple[list[ProcessSample], dict[str, int]]:
    """The processes to export (at least ``min_age`` seconds old at ``now``; of those the ``cap`` largest
    GPU-memory holders) and how many were left out for each reason."""
    old = [p for p in processes if not min_age or p.create_time is None or now - p.create_time >= min_age]
    left_out = {"young": len(processes) - len(old), "cap": max(0, len(old) - cap)}
    if len(old) <= cap:
        return old, left_out
    return sorted(old, key=_rank)[:cap], left_out


def process_values(p: ProcessSample, host: str) -> list[str]:
    """Values of :data:`SERIES_PROCESS_LABELS`."""
    identity = p.identity_labels(host)
    return [*(v for k, v in identity.items() if k != HOST_LABEL), *p.pod_labels().values(), p.container_id or ""]


def process_families(snap: Snapshot, kept: Sequence[ProcessSample], totals: RateTotals | None = None
                     ) -> Iterator[Metric]:
    host = snap.host.hostname
    yield from catalogue_families("process", ((process_values(p, host), p) for p in kept), totals)
    count = family(GPU_PROCESSES)
    for gpu in snap.gpus:
        count.add_metric([str(gpu.index)], len(snap.processes_on(gpu.index)))
    yield count
