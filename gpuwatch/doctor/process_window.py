"""One process over a window: the medians and shares of its samples that the rules read, its feeding
thread's time by wait class, its stacks (where sampled) and the feeders that feed it (``summarise`` in
``window`` builds one per process on each GPU)."""

from __future__ import annotations

import operator
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from gpuwatch.doctor.feeder_window import FeederWindow, waited_on
from gpuwatch.doctor.stack_window import StackEvidence, process_stacks
from gpuwatch.model.process_sample import POLL_TIMER, ProcessSample
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
    #: What its main thread's blocked writes went to, most often (a terminal ``/dev/pts/3``, a pipe, a socket).
    write_target: str | None = None

    @property
    def label(self) -> str:
        return f"pid {self.pid}" + (f" ({self.name})" if self.name else "")


BUSY_THREAD_CPU = 10.0  # a thread at this share of a core does real work (a GIL holder in turn, say)
#: Share of the samples with the main thread in a poll in which only a timer could end it, from which it sleeps
#: on a timer (a majority): its selector frames are a sleep, and the general finding says so.
TIMER_POLLS = 0.5


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
    waits = Counter(main_thread_wait("S", p.wait_channel, p.poll_wait, p.write_target) for p in procs if p.wait_channel)
    n = len(procs)
    return {w: c / n for w, c in waits.items()}


def _polls_timed(ev: StackEvidence | None, timer_share: float | None) -> StackEvidence | None:
    """The main thread's stacks, where its polls mostly waited on nothing another process could send: their
    "waiting for input" frames are an event loop asleep on a timer (``sources.blocked_call``)."""
    if ev is None or ev.pid not in ev.tids or timer_share is None or timer_share < TIMER_POLLS:
        return ev
    return ev.relabel("input", "sleep")


def _lock_share(procs: list[ProcessSample]) -> float | None:
    waits = [w for p in procs for c, w in zip(p.thread_cpu_percents, p.thread_waits, strict=False)
             if c >= BUSY_THREAD_CPU]
    return sum(w == "lock" for w in waits) / len(waits) if waits else None


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


def process_window(samples: list[tuple[float, ProcessSample]], gpu_util_max: float | None,
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
        file_lock_holder=_mode(holders), write_target=_mode(Counter(p.write_target for p in procs if p.write_target)))
