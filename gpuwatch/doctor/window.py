"""A window of Snapshots reduced to the few numbers the rules need: per GPU and per process.

Medians, not means, for levels: a warm-up spike or one late sample must not decide a diagnosis. Means
for shares that alternate by nature (time-sliced processes take turns). Memory keeps its whole series,
because a leak and a jitter are shapes over time, not levels. A metric the backend never gave stays
None, and the rules that need it stay silent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuwatch.doctor.feeder_window import feeder_windows
from gpuwatch.doctor.process_window import ProcessWindow, Series, median, process_window
from gpuwatch.model.metrics import METRICS, as_value
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, Snapshot


@dataclass
class GpuWindow:
    index: int
    name: str | None
    samples: int
    seconds: float = 0.0
    util: float | None = None
    util_max: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    fp32_active: float | None = None
    pcie_rx_bytes_s: float | None = None
    mem_used_percent: float | None = None
    mem_total_bytes: int | None = None
    mem_used: Series = ()
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    pcie_tx_bytes_s: float | None = None
    #: Threads running or runnable on the host (median), against its cores: above them, threads queue.
    host_procs_running: float | None = None
    #: Share of samples in which each clock-event reason was active.
    clock_event_share: dict[str, float] = field(default_factory=dict)
    processes: list[ProcessWindow] = field(default_factory=list)
    host_iowait: float | None = None
    host_cpu_count: int | None = None
    host_cpu: float | None = None
    #: Why stacks are missing, from the ``stacks`` source's status (None: no such source, or it is fine).
    stacks_problem: str | None = None

    @property
    def busy(self) -> float | None:
        """How busy the GPU looks: GPU-Util, or SM activity where GPU-Util is missing."""
        return self.util if self.util is not None else self.sm_active


def _gpu_metric(gpus: list[GpuSample], key: str) -> float | None:
    """``median([read_metric(key, g) for g in gpus])``, with the metric's reader looked up once: the doctor
    reads eleven metrics of every GPU sample of a window, and the accounting judges a window every 10 s."""
    read = METRICS[key].read
    return median([as_value(read(g)) for g in gpus])


def summarise(snapshots: Sequence[Snapshot], pid: int | None = None) -> list[GpuWindow]:
    """One GpuWindow per GPU seen in the window (only the GPUs ``pid`` used, when a pid is given)."""
    by_gpu: dict[int, list[tuple[float, GpuSample]]] = {}
    procs: dict[tuple[int, int], list[tuple[float, ProcessSample]]] = {}
    for snap in snapshots:
        for g in snap.gpus:
            by_gpu.setdefault(g.index, []).append((snap.time, g))
        for p in snap.processes:
            if pid is None or p.pid == pid:
                procs.setdefault((p.gpu_index, p.pid), []).append((snap.time, p))
    cpu_count = next((s.host.cpu_count for s in reversed(snapshots) if s.host.cpu_count), None)
    stacks = [st for s in snapshots for st in s.stacks]
    feeders = feeder_windows([f for s in snapshots for f in s.feeders], stacks)
    status = snapshots[-1].source("stacks")
    stacks_problem = None if status is None or (status.state == "ok" and not status.message) else \
        (status.message or status.state)
    out = []
    for index, timed in sorted(by_gpu.items()):
        gpus = [g for _, g in timed]
        utils = [g.gpu_util for g in gpus if g.gpu_util is not None]
        mine = [process_window(v, max(utils) if utils else None, stacks, feeders)
                for (gi, _), v in sorted(procs.items()) if gi == index]
        if pid is not None and not mine:
            continue
        events = [g.active_clock_events for g in gpus if g.clock_event_mask is not None or g.clock_events]
        shares = {r: sum(r in e for e in events) / len(events) for r in set().union(*events)} if events else {}
        out.append(GpuWindow(
            index=index, name=gpus[-1].name, samples=len(gpus), seconds=timed[-1][0] - timed[0][0],
            util=median(utils), util_max=max(utils) if utils else None,
            sm_active=_gpu_metric(gpus, "gpu.sm_active"), sm_occupancy=_gpu_metric(gpus, "gpu.sm_occupancy"),
            tensor_active=_gpu_metric(gpus, "gpu.tensor_active"), dram_active=_gpu_metric(gpus, "gpu.dram_active"),
            fp32_active=_gpu_metric(gpus, "gpu.fp32_active"), pcie_rx_bytes_s=_gpu_metric(gpus, "gpu.pcie_rx_bytes_s"),
            mem_used_percent=_gpu_metric(gpus, "gpu.mem_used_percent"), mem_total_bytes=gpus[-1].mem_total_bytes,
            mem_used=tuple((t, float(g.mem_used_bytes)) for t, g in timed if g.mem_used_bytes is not None),
            sm_clock_mhz=_gpu_metric(gpus, "gpu.sm_clock_mhz"),
            sm_clock_max_mhz=_gpu_metric(gpus, "gpu.sm_clock_max_mhz"),
            power_w=_gpu_metric(gpus, "gpu.power_w"), power_limit_w=_gpu_metric(gpus, "gpu.power_limit_w"),
            pcie_tx_bytes_s=median([g.pcie_tx_rate for g in gpus]),
            host_procs_running=median([s.host.procs_running for s in snapshots]),
            clock_event_share=shares, processes=mine, host_iowait=median([s.host.iowait_percent for s in snapshots]),
            host_cpu_count=cpu_count, host_cpu=median([s.host.cpu_percent for s in snapshots]),
            stacks_problem=stacks_problem))
    return out
