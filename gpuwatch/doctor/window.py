"""A window of Snapshots reduced to the few numbers the rules need: per GPU and per process.

Medians, not means, for levels: a warm-up spike or one late sample must not decide a diagnosis. Means
for shares that alternate by nature (time-sliced processes take turns). Memory keeps its whole series,
because a leak and a jitter are shapes over time, not levels. A metric the backend never gave stays
None, and the rules that need it stay silent.
"""

from __future__ import annotations

import operator
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from gpuwatch.doctor.feeder_window import FeederWindow, feeder_windows, waited_on
from gpuwatch.doctor.stack_window import StackEvidence, process_stacks
from gpuwatch.model.metrics import METRICS, as_value
from gpuwatch.model.process_sample import POLL_TIMER, ProcessSample
from gpuwatch.model.snapshot import GpuSample, Snapshot
from gpuwatch.model.stacks import StackSample
from gpuwatch.model.thread_wait import classify_wait, main_thread_wait

_T = TypeVar("_T")


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def share(flags: Sequence[bool | None]) -> float | None:
    """Fraction of samples where the flag held (samples without a value are left out)."""
    present = [f for f in flags if f is not None]
    return sum(present) / len(present) if present else None


Series = tuple[tuple[float, float], ...]  # (time, value) points, oldest first


@dataclass
class ProcessWindow:
    pid: int
    name: str | None
    samples: int
    seconds: float
    top_thread_cpu: float | None = None
    top_thread_id: int | None = None
    cpu: float | None = None
    sm_util_mean: float | None = None
    #: Share of samples with at least one thread in D state (uninterruptible: storage, NFS).
    io_wait_share: float | None = None
    #: Share of samples with no thread runnable: the process waits off the CPU.
    sleeping_share: float | None = None
    #: Share of samples in which the process was stopped (state T: SIGSTOP) or frozen.
    stopped_share: float | None = None
    #: Of the samples with its main thread in a poll, the share in which only a timer could end it.
    poll_timer_share: float | None = None
    wait_channel: str | None = None  # the most common one
    io_read_bytes_s: float | None = None
    io_write_bytes_s: float | None = None
    io_read_chars_s: float | None = None
    #: Major page faults per second (median; None: not recorded): pages of a mapped file read from storage.
    major_faults_s: float | None = None
    #: Of its CPU, the part in the kernel (system time, percent of one core), and minor page faults per second
    #: (medians; None: not recorded): memory touched afresh, mapped and zeroed by the kernel.
    system_cpu: float | None = None
    minor_faults_s: float | None = None
    gpu_memory_bytes: float | None = None
    gpu_memory: Series = ()
    workers: int | None = None
    workers_cpu: float | None = None
    workers_busy: float | None = None
    #: Where the busiest (feeding) thread's time goes: percent of wall time on a core, runnable without a
    #: core (None without schedstat), and the share of samples in each wait class (``model.thread_wait``).
    top_run_wait: float | None = None
    top_waits: dict[str, float] = field(default_factory=dict)
    #: The working threads together (each at 2 % of a core or more): CPU summed, percent of one core; how
    #: many of them use 10 % or more; the share of their samples asleep on a lock (futex: the GIL too).
    threads_cpu: float | None = None
    busy_threads: float | None = None
    threads_lock_share: float | None = None
    #: All threads' time runnable without a core, percent of one core.
    run_wait: float | None = None
    #: Share of samples in each wait class of the main thread, from its wait channel (where it sleeps).
    main_waits: dict[str, float] = field(default_factory=dict)
    #: Where its feeding thread's sampled stacks go (None: no stacks in the window).
    stacks: StackEvidence | None = None
    #: The processes that feed it (children, siblings, pipe and socket peers), busiest first.
    feeders: list[FeederWindow] = field(default_factory=list)
    #: Where its work comes from (``model.feeders.Upstream``), the most common answer; None: not read.
    upstream: str | None = None
    #: Its CPU limit below the host's cores (cores, median) and what sets it (cgroup quota or CPU affinity),
    #: and the median share of its quota's periods its cgroup was throttled in; None: no limit, not read.
    cpu_limit: float | None = None
    cpu_limit_by: str | None = None
    throttled: float | None = None
    #: The busiest other processes under its quota at the last sample that had any: (pid, name, CPU %).
    limit_peers: tuple[tuple[int, str, float], ...] = ()
    #: The process holding the file lock it waited on in most samples that had one: (pid, name).
    file_lock_holder: tuple[int, str | None] | None = None

    @property
    def label(self) -> str:
        return f"pid {self.pid}" + (f" ({self.name})" if self.name else "")


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


BUSY_THREAD_CPU = 10.0  # a thread at this share of a core does real work (a GIL holder in turn, say)
#: Share of the samples that decides what a process's poll waited for (a majority).
STACK_SHARE = 0.5


def _wait_shares(procs: list[ProcessSample]) -> dict[str, float]:
    tops = Counter(p.thread_waits[0] for p in procs if p.thread_waits)
    n = sum(tops.values())
    return {w: c / n for w, c in tops.items()} if n else {}


def _mode(counts: Counter[_T]) -> _T | None:
    """The most common value counted, None where nothing was."""
    return counts.most_common(1)[0][0] if counts else None


def _limit_peers(procs: list[ProcessSample]) -> tuple[tuple[int, str, float], ...]:
    last = next((p for p in reversed(procs) if p.cpu_limit_peer_pids), None)
    if last is None:
        return ()
    return tuple(zip(last.cpu_limit_peer_pids, last.cpu_limit_peer_names, last.cpu_limit_peer_cpu_percents,
                     strict=False))


def _stopped(p: ProcessSample) -> bool:
    """Stopped at the sample: state T (a signal; recordings made before tracing stops were kept apart also
    show the stack sampler's own brief pauses as T), or its main thread in a cgroup freezer's trap."""
    return p.state is not None and classify_wait(p.state, p.wait_channel) == "stopped"


def _main_wait_shares(procs: list[ProcessSample]) -> dict[str, float]:
    waits = Counter(main_thread_wait("S", p.wait_channel, p.poll_wait) for p in procs if p.wait_channel)
    n = len(procs)
    return {w: c / n for w, c in waits.items()}


def _polls_timed(ev: StackEvidence | None, timer_share: float | None) -> StackEvidence | None:
    """The main thread's stacks, where its polls mostly waited on nothing another process could send: their
    "waiting for input" frames are an event loop asleep on a timer (``sources.poll_wait``)."""
    if ev is None or ev.pid not in ev.tids or timer_share is None or timer_share < STACK_SHARE:
        return ev
    return ev.relabel("input", "sleep")


def _lock_share(procs: list[ProcessSample]) -> float | None:
    waits = [w for p in procs for c, w in zip(p.thread_cpu_percents, p.thread_waits, strict=False)
             if c >= BUSY_THREAD_CPU]
    return sum(w == "lock" for w in waits) / len(waits) if waits else None


def _gpu_metric(gpus: list[GpuSample], key: str) -> float | None:
    """``median([read_metric(key, g) for g in gpus])``, with the metric's reader looked up once: the doctor
    reads eleven metrics of every GPU sample of a window, and the accounting judges a window every 10 s."""
    read = METRICS[key].read
    return median([as_value(read(g)) for g in gpus])


#: The process fields the window takes the median of, read in one pass over the samples (one C-level getter
#: per sample, then a column per field) rather than one Python call per field and sample.
_MEDIAN_FIELDS = ("top_thread_cpu_percent", "cpu_percent", "io_read_bytes_s", "io_write_bytes_s",
                  "io_read_chars_s", "major_faults_s", "cpu_system_percent", "minor_faults_s", "gpu_memory_bytes",
                  "workers_cpu_percent", "workers_busy", "run_wait_percent", "cpu_limit_cores",
                  "cpu_throttled_percent")
_median_row = operator.attrgetter(*_MEDIAN_FIELDS)


def _column_median(column: Sequence[float | int | None]) -> float | None:
    present = [float(v) for v in column if v is not None]
    return statistics.median(present) if present else None


def _process_window(samples: list[tuple[float, ProcessSample]], gpu_util_max: float | None,
                    stacks: Sequence[StackSample] = (), feeders: Sequence[FeederWindow] = ()) -> ProcessWindow:
    """One process's window. Its SM shares are capped at the GPU's busiest sample in the window: NVML
    answers them every few seconds for the span since its last answer, so the first one may describe time
    before the window (a warm-up that filled the GPU), and no process used more of the GPU than it was busy."""
    procs = [p for _, p in samples]
    last = procs[-1]
    tops = [(p.top_thread_cpu_percent or 0.0, p.top_thread_id) for p in procs if p.top_thread_id is not None]
    channels = Counter(p.wait_channel for p in procs if p.wait_channel)
    upstream = Counter(p.upstream for p in procs if p.upstream)
    limited_by = Counter(p.cpu_limit_by for p in procs if p.cpu_limit_by)
    holders = Counter((p.file_lock_holder_pid, p.file_lock_holder_name) for p in procs if p.file_lock_holder_pid)
    top_tid = max(tops)[1] if tops else None
    med = dict(zip(_MEDIAN_FIELDS, map(_column_median, zip(*map(_median_row, procs), strict=True)), strict=True))
    run_waits, threads_cpu, busy = [], [], []
    for p in procs:
        percents = p.thread_cpu_percents
        run_waits.append(p.thread_run_wait_percents[0] if p.thread_run_wait_percents else None)
        threads_cpu.append(sum(percents) if percents else None)
        busy.append(sum(c >= BUSY_THREAD_CPU for c in percents) if percents else None)

    return ProcessWindow(
        pid=last.pid, name=last.name, samples=len(procs), seconds=samples[-1][0] - samples[0][0],
        top_thread_cpu=med["top_thread_cpu_percent"], top_thread_id=max(tops)[1] if tops else None,
        cpu=med["cpu_percent"], sm_util_mean=mean([None if p.sm_util is None else
                                                   min(p.sm_util, 100.0 if gpu_util_max is None else gpu_util_max)
                                                   for p in procs]),
        io_wait_share=share([None if p.threads_in_io_wait is None else p.threads_in_io_wait > 0 for p in procs]),
        sleeping_share=share([None if p.threads_running is None else p.threads_running == 0 for p in procs]),
        stopped_share=share([None if p.state is None else _stopped(p) for p in procs]),
        wait_channel=_mode(channels),
        io_read_bytes_s=med["io_read_bytes_s"], io_write_bytes_s=med["io_write_bytes_s"],
        io_read_chars_s=med["io_read_chars_s"], major_faults_s=med["major_faults_s"],
        system_cpu=med["cpu_system_percent"], minor_faults_s=med["minor_faults_s"],
        gpu_memory_bytes=med["gpu_memory_bytes"],
        gpu_memory=tuple((t, float(p.gpu_memory_bytes)) for t, p in samples if p.gpu_memory_bytes is not None),
        workers=max((p.workers for p in procs if p.workers is not None), default=None),
        workers_cpu=med["workers_cpu_percent"], workers_busy=med["workers_busy"],
        top_run_wait=_column_median(run_waits),
        top_waits=_wait_shares(procs),
        threads_cpu=_column_median(threads_cpu),
        busy_threads=_column_median(busy),
        threads_lock_share=_lock_share(procs), run_wait=med["run_wait_percent"],
        main_waits=_main_wait_shares(procs), poll_timer_share=(timed := share(
            [None if p.poll_wait is None else p.poll_wait == POLL_TIMER for p in procs])),
        stacks=(ev := _polls_timed(process_stacks(stacks, last.pid, top_tid), timed)),
        feeders=waited_on([f for f in feeders if f.feeds == last.pid], ev),
        upstream=_mode(upstream),
        cpu_limit=med["cpu_limit_cores"], cpu_limit_by=_mode(limited_by),
        throttled=med["cpu_throttled_percent"], limit_peers=_limit_peers(procs),
        file_lock_holder=_mode(holders))


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
        mine = [_process_window(v, max(utils) if utils else None, stacks, feeders)
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
