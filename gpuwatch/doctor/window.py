"""A window of Snapshots reduced to the few numbers the rules need: medians per GPU and per process.

Medians, not means: a warm-up spike or one late sample must not decide a diagnosis. A metric the
backend never gave stays None, and the rules that need it stay silent.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gpuwatch.model.clock_events import decode
from gpuwatch.model.metrics import read_metric
from gpuwatch.model.snapshot import GpuSample, ProcessSample, Snapshot


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


@dataclass
class ProcessWindow:
    pid: int
    name: str | None
    samples: int
    top_thread_cpu: float | None
    top_thread_id: int | None
    cpu: float | None
    io_wait_share: float | None  # share of samples with at least one thread in D state
    io_read_bytes_s: float | None
    gpu_memory_bytes: float | None

    @property
    def label(self) -> str:
        return f"pid {self.pid}" + (f" ({self.name})" if self.name else "")


@dataclass
class GpuWindow:
    index: int
    name: str | None
    samples: int
    util: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    fp32_active: float | None = None
    pcie_rx_bytes_s: float | None = None
    mem_used_percent: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    #: Share of samples in which each clock-event reason was active.
    clock_event_share: dict[str, float] = field(default_factory=dict)
    processes: list[ProcessWindow] = field(default_factory=list)
    host_iowait: float | None = None
    host_cpu_count: int | None = None

    @property
    def busy(self) -> float | None:
        """How busy the GPU looks: GPU-Util, or SM activity where GPU-Util is missing."""
        return self.util if self.util is not None else self.sm_active


def _gpu_metric(gpus: list[GpuSample], key: str) -> float | None:
    return median([read_metric(key, g) for g in gpus])


def _process_window(samples: list[ProcessSample]) -> ProcessWindow:
    last = samples[-1]
    io = [p.threads_in_io_wait for p in samples if p.threads_in_io_wait is not None]
    tops = [(p.top_thread_cpu_percent or 0.0, p.top_thread_id) for p in samples if p.top_thread_id is not None]
    busiest = max(tops)[1] if tops else None

    def m(get: Callable[[ProcessSample], float | int | None]) -> float | None:
        return median([None if get(p) is None else float(get(p) or 0) for p in samples])

    return ProcessWindow(
        pid=last.pid, name=last.name, samples=len(samples),
        top_thread_cpu=m(lambda p: p.top_thread_cpu_percent), top_thread_id=busiest,
        cpu=m(lambda p: p.cpu_percent),
        io_wait_share=(sum(1 for n in io if n > 0) / len(io)) if io else None,
        io_read_bytes_s=m(lambda p: p.io_read_bytes_s), gpu_memory_bytes=m(lambda p: p.gpu_memory_bytes))


def summarise(snapshots: Sequence[Snapshot], pid: int | None = None) -> list[GpuWindow]:
    """One GpuWindow per GPU seen in the window (only the GPUs ``pid`` used, when a pid is given)."""
    by_gpu: dict[int, list[GpuSample]] = {}
    procs: dict[tuple[int, int], list[ProcessSample]] = {}
    for snap in snapshots:
        for g in snap.gpus:
            by_gpu.setdefault(g.index, []).append(g)
        for p in snap.processes:
            if pid is None or p.pid == pid:
                procs.setdefault((p.gpu_index, p.pid), []).append(p)
    iowait = median([s.host.iowait_percent for s in snapshots])
    cpu_count = next((s.host.cpu_count for s in reversed(snapshots) if s.host.cpu_count), None)
    out = []
    for index, gpus in sorted(by_gpu.items()):
        mine = [_process_window(v) for (gi, _), v in sorted(procs.items()) if gi == index]
        if pid is not None and not mine:
            continue
        shares: dict[str, float] = {}
        masks = [g for g in gpus if g.clock_event_mask is not None or g.clock_events]
        for g in masks:
            for reason in g.clock_events or decode(g.clock_event_mask):
                shares[reason] = shares.get(reason, 0.0) + 1.0 / len(masks)
        out.append(GpuWindow(
            index=index, name=gpus[-1].name, samples=len(gpus),
            util=_gpu_metric(gpus, "gpu.util"), sm_active=_gpu_metric(gpus, "gpu.sm_active"),
            sm_occupancy=_gpu_metric(gpus, "gpu.sm_occupancy"), tensor_active=_gpu_metric(gpus, "gpu.tensor_active"),
            dram_active=_gpu_metric(gpus, "gpu.dram_active"), fp32_active=_gpu_metric(gpus, "gpu.fp32_active"),
            pcie_rx_bytes_s=_gpu_metric(gpus, "gpu.pcie_rx_bytes_s"),
            mem_used_percent=_gpu_metric(gpus, "gpu.mem_used_percent"),
            sm_clock_mhz=_gpu_metric(gpus, "gpu.sm_clock_mhz"),
            sm_clock_max_mhz=_gpu_metric(gpus, "gpu.sm_clock_max_mhz"),
            power_w=_gpu_metric(gpus, "gpu.power_w"), power_limit_w=_gpu_metric(gpus, "gpu.power_limit_w"),
            clock_event_share=shares, processes=mine, host_iowait=iowait, host_cpu_count=cpu_count))
    return out
