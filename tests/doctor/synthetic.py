"""Synthetic windows for the doctor: a few Snapshots of one GPU and one process, with chosen medians, and
(where given) the stacks sampled from that process and the processes that feed it."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.model.clock_events import encode
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Profiling, Snapshot, SourceStatus
from gpuwatch.model.stacks import Frame, StackSample, ThreadStack

SITE = "/usr/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"


def py(path: str, function: str, line: int = 1) -> Frame:
    """A Python frame; a bare name (``model.py``) is the user's own code, ``SITE``/``STDLIB`` paths are not."""
    return Frame(function, path, line)


def native(module: str, function: str) -> Frame:
    return Frame(function, "", None, native=True, module=module)


def thread(*frames: Frame, tid: int = 471, count: int = 1, idle: bool = False) -> ThreadStack:
    """One stack of thread ``tid``, frames innermost first."""
    return ThreadStack(tid, tuple(frames), count=count, idle=idle)

H200_MEMORY = 150_754_820_096


@dataclass(frozen=True)
class Load:
    """What one GPU and its serving process look like over a window (None: the backend has no value)."""

    util: float | None = 0.0
    sm: float | None = 0.0
    occupancy: float | None = 0.0
    tensor: float | None = 0.0
    dram: float | None = 0.0
    mem_percent: float = 1.0
    thread: float | None = 10.0
    io_wait_threads: int = 0
    host_iowait: float = 0.0
    host_cpu: float = 10.0
    clock: float = 1980.0
    events: tuple[str, ...] = ()
    pcie_rx: float | None = 2e7
    power: float = 300.0
    pid: int = 471
    #: Stacks sampled from the process on every snapshot (none: no stack source, as on old recordings).
    stacks: tuple[ThreadStack, ...] = ()
    feeders: tuple[FeederSample, ...] = ()
    upstream: str | None = None
    channel: str | None = None
    waits: tuple[str, ...] = ()
    workers: int | None = None
    workers_cpu: float | None = None
    #: The stack source's status ("error: ptrace not permitted"), None: no such source.
    stacks_status: SourceStatus | None = None
    #: The whole process's CPU (None: the feeding thread's), bytes/s read from storage and through read calls,
    #: and major page faults/s (None: not read, as on recordings made before they were).
    cpu: float | None = None
    read_bytes: float | None = None
    read_chars: float | None = None
    major_faults: float | None = None


def window(load: Load, n: int = 10, t0: float = 1_764_666_000.0) -> list[Snapshot]:
    prof = Profiling(sm_active=load.sm, sm_occupancy=load.occupancy, tensor_active=load.tensor,
                     dram_active=load.dram, pcie_rx_bytes_s=load.pcie_rx)
    gpu = GpuSample(index=0, uuid="GPU-2ef31ce1-54e1-f5dd-f3c9-bdcccda00fcc", name="NVIDIA H200",
                    gpu_util=load.util, mem_used_bytes=int(H200_MEMORY * load.mem_percent / 100),
                    mem_total_bytes=H200_MEMORY, sm_clock_mhz=load.clock, sm_clock_max_mhz=1980.0,
                    power_w=load.power, power_limit_w=700.0, clock_event_mask=encode(load.events),
                    clock_events=load.events,
                    profiling={"gpm": prof} if any(v is not None for v in (load.sm, load.tensor)) else {})
    proc = ProcessSample(pid=load.pid, gpu_index=0, gpu_memory_bytes=2 << 30, name="python3",
                         cpu_percent=load.thread if load.cpu is None else load.cpu,
                         top_thread_cpu_percent=load.thread, top_thread_id=load.pid,
                         threads_in_io_wait=load.io_wait_threads, upstream=load.upstream, wait_channel=load.channel,
                         thread_waits=load.waits, thread_cpu_percents=(load.thread or 0.0,) if load.waits else (),
                         workers=load.workers, workers_cpu_percent=load.workers_cpu,
                         threads_running=0 if load.channel else None, io_read_bytes_s=load.read_bytes,
                         io_read_chars_s=load.read_chars, major_faults_s=load.major_faults)
    host = HostSample(hostname="gpu-node-1", cpu_count=16, cpu_percent=load.host_cpu, iowait_percent=load.host_iowait)
    sources = (load.stacks_status,) if load.stacks_status else ()
    return [Snapshot(time=t0 + i, host=host, gpus=(gpu,), processes=(proc,), seq=i + 1, sources=sources,
                     stacks=(StackSample(load.pid, t0 + i, 1.0, load.stacks, native=True),) if load.stacks else (),
                     feeders=load.feeders) for i in range(n)]
