"""Host source (psutil + /proc): machine CPU, memory, iowait, and details for the processes on the GPUs.

It looks only at the pids the GPU sources found (never a walk over every process on the host), keeps
one psutil.Process per pid so CPU and IO are deltas between ticks, and follows each one's threads
(:mod:`gpuwatch.sources.host_threads`) so a GIL-bound serving thread at 100 % of one core is visible even
when the process total looks modest. For a process whose threads wait, it follows the wait to the processes
that feed it (:mod:`gpuwatch.sources.host_feeders`).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from gpuwatch.model.snapshot import HostSample
from gpuwatch.model.thread_wait import classify_wait, main_thread_wait
from gpuwatch.sources.base import Reading, Source
from gpuwatch.sources.blocked_call import is_ambiguous_channel, is_poll_channel, read_poll_wait, read_write_target
from gpuwatch.sources.cpu_limits import CpuLimits
from gpuwatch.sources.file_locks import read_lock_holder
from gpuwatch.sources.host_feeders import FeederTracker
from gpuwatch.sources.host_threads import ThreadTracker
from gpuwatch.sources.machine import CpuJiffies, read_cpu_stat, read_meminfo
from gpuwatch.sources.netfds import read_comm
from gpuwatch.sources.procfs import (
    ProcessStat,
    container_id_from_cgroup,
    forget,
    read_children,
    read_cpu_seconds,
    read_process_io,
    read_process_stat,
    read_wait_channel,
)


@dataclass
class _Tracked:
    proc: psutil.Process
    static: dict[str, Any]
    last_time: float
    last_cpu: float
    last_io: tuple[int, int, int, int] | None
    threads: ThreadTracker
    #: The last tick's ``/proc/PID/stat`` (its system time and page faults), None before the first.
    last_stat: ProcessStat | None = None
    #: What its main thread's poll waits for, as last read (``poll_wait``), and when.
    poll_wait: str | None = None
    poll_at: float = float("-inf")
    #: Worker child pid -> CPU seconds at the last tick; refreshed every CHILDREN_EVERY_S.
    children: dict[int, float] = field(default_factory=dict)
    children_at: float = float("-inf")
    all_children_at: float = float("-inf")


#: Finding a process's children reads one file per thread (``/proc/PID/task/*/children``; one schedstat
#: instead for a thread that has not run since the last such read). Every CHILDREN_EVERY_S the hot threads'
#: files are read (the main thread, which starts data-loader and pool workers, and the working ones), every
#: CHILDREN_ALL_EVERY_S every thread's; the known workers' CPU is read every tick.
CHILDREN_EVERY_S = 5.0
CHILDREN_ALL_EVERY_S = 30.0
BUSY_WORKER = 80.0
#: What a quiet process's poll waits for is read again at most this often (its epoll set and its peers change
#: when it connects or listens, not tick by tick).
POLL_REREAD_S = 5.0


class HostSource(Source):
    name = "host"
    role = "host"
    deadline_s = 2.0

    def __init__(self) -> None:
        # In a Kubernetes pod the hostname is the pod's; the DaemonSet passes the node's name as NODE_NAME
        # (as for dcgm-exporter), so series and alerts name the machine.
        self.hostname = os.environ.get("NODE_NAME") or socket.gethostname()
        self._tracked: dict[int, _Tracked] = {}
        self._last_cpu_times: CpuJiffies | None = None
        self._procs_running: int | None = None
        self._cpu_count = psutil.cpu_count() or None
        self._feeders = FeederTracker()
        self._limits = CpuLimits(self._cpu_count)

    # -- the machine -------------------------------------------------------------------------------------
    def _host(self) -> HostSample:
        times = self._cpu_jiffies()
        total = iowait = None
        last = self._last_cpu_times
        if last is not None and times.total > last.total:
            d_all = times.total - last.total
            total = round(100.0 * (d_all - (times.idle - last.idle)) / d_all, 2)
            iowait = round(100.0 * (times.iowait - last.iowait) / d_all, 2)
        self._last_cpu_times = times
        mem_total, mem_available = self._memory()
        try:
            load1, load5, load15 = os.getloadavg()
        except OSError:
            load1 = load5 = load15 = None  # type: ignore[assignment]
        return HostSample(hostname=self.hostname, cpu_count=self._cpu_count, cpu_percent=total,
                          iowait_percent=iowait, load1=load1, load5=load5,
                          load15=load15, mem_total_bytes=mem_total, mem_used_bytes=mem_total - mem_available,
                          mem_available_bytes=mem_available, procs_running=self._procs_running)

    def _cpu_jiffies(self) -> CpuJiffies:
        try:
            jiffies, self._procs_running = read_cpu_stat()
            return jiffies
        except (OSError, ValueError):  # no /proc (macOS) or an unexpected layout: psutil knows the platform
            self._procs_running = None
            t = psutil.cpu_times()
            return CpuJiffies(round(sum(t) * 100), round((t.idle + getattr(t, "iowait", 0.0)) * 100),
                              round(getattr(t, "iowait", 0.0) * 100))

    @staticmethod
    def _memory() -> tuple[int, int]:
        try:
            found = read_meminfo()
        except (OSError, ValueError):
            found = None
        if found is not None:
            return found
        vm = psutil.virtual_memory()
        return vm.total, vm.available

    # -- the processes on the GPUs -----------------------------------------------------------------------
    def _track(self, pid: int, now: float, gpu_pids: set[int]) -> _Tracked | None:
        t = self._tracked.get(pid)
        if t is not None:
            return t
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                cpu = proc.cpu_times()
                static: dict[str, Any] = {
                    "ppid": proc.ppid(),
                    "user": _safe(proc.username),
                    "name": _safe(proc.name),
                    "cmdline": " ".join(_safe(proc.cmdline) or []) or None,
                    "create_time": proc.create_time(),
                }
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return None
        except psutil.AccessDenied:
            return None
        try:
            cgroup: str | None = Path(f"/proc/{pid}/cgroup").read_text(errors="surrogateescape")
            static["container_id"] = container_id_from_cgroup(cgroup or "")
        except OSError:
            cgroup = static["container_id"] = None
        self._limits.track(pid, cgroup)
        t = _Tracked(proc, static, now, cpu.user + cpu.system, read_process_io(pid), ThreadTracker(pid))
        t.threads.baseline(now, cpu.user + cpu.system)
        self._workers(t, pid, now, 0.0, gpu_pids)  # the baseline of its workers' CPU
        self._tracked[pid] = t
        return t

    def _workers(self, t: _Tracked, pid: int, now: float, dt: float, gpu_pids: set[int]) -> dict[str, Any]:
        """Child processes without a GPU context, and how hard they work (data-loader workers)."""
        if now - t.children_at >= CHILDREN_EVERY_S:
            every_thread = now - t.all_children_at >= CHILDREN_ALL_EVERY_S or not t.threads.hot
            t.children_at = now
            if every_thread:
                t.all_children_at = now
            found = read_children(pid, tids=None if every_thread else t.threads.hot)
            if not every_thread:  # workers of the other threads stay known (gone ones drop out below)
                found = list(dict.fromkeys([*found, *t.children]))
            kids = [c for c in found if c not in gpu_pids]
            for gone in set(t.children).difference(kids):
                forget(gone)
            t.children = {c: t.children.get(c, read_cpu_seconds(c) or 0.0) for c in kids}
        if not t.children or dt <= 0:
            return {"workers": len(t.children)}
        total, busy, cpu = 0.0, 0, {}
        for child, before in t.children.items():
            seconds = read_cpu_seconds(child)
            if seconds is None:
                continue
            cpu[child] = seconds
            pct = 100.0 * (seconds - before) / dt if dt > 0 else 0.0
            total += pct
            busy += pct >= BUSY_WORKER
        t.children = cpu
        return {"workers": len(cpu), "workers_cpu_percent": round(total, 1), "workers_busy": busy}

    def _details(self, pid: int, now: float, gpu_pids: set[int]) -> dict[str, Any] | None:
        t = self._track(pid, now, gpu_pids)
        if t is None:
            return None
        stat = read_process_stat(pid)
        if stat is None:
            self._forget(pid)
            return None
        state, cpu_total = stat.state, stat.cpu_seconds
        io = read_process_io(pid)
        dt = now - t.last_time
        out = {**t.static, "rss_bytes": stat.rss_bytes, "state": state, "num_threads": stat.threads}
        cpu_pct = None
        if dt > 0:
            cpu_pct = out["cpu_percent"] = round(100.0 * (cpu_total - t.last_cpu) / dt, 1)
            last_io = t.last_io
            if io is not None and last_io is not None:
                out["io_read_bytes_s"] = max(0.0, (io[0] - last_io[0]) / dt)
                out["io_write_bytes_s"] = max(0.0, (io[1] - last_io[1]) / dt)
                out["io_read_chars_s"] = max(0.0, (io[2] - last_io[2]) / dt)
                out["io_write_chars_s"] = max(0.0, (io[3] - last_io[3]) / dt)
            last = t.last_stat
            if last is not None:
                out["major_faults_s"] = round(max(0.0, (stat.major_faults - last.major_faults) / dt), 1)
                out["minor_faults_s"] = round(max(0.0, (stat.minor_faults - last.minor_faults) / dt), 1)
                out["cpu_system_percent"] = round(max(0.0, 100.0 * (stat.system_seconds - last.system_seconds) / dt), 1)
        out.update(self._workers(t, pid, now, dt, gpu_pids))
        # a running main thread waits nowhere (the kernel gives 0): its wchan file is not read
        out["wait_channel"] = channel = None if state == "R" else read_wait_channel(pid)
        if is_poll_channel(channel):  # input another process could send, or only a timer
            if now - t.poll_at >= POLL_REREAD_S:
                t.poll_wait, t.poll_at = read_poll_wait(pid), now
            out["poll_wait"] = t.poll_wait
        elif is_ambiguous_channel(channel):  # a reader's, or a writer's: the blocked call tells which
            out["write_target"] = read_write_target(pid)
        out.update(t.threads.update(now, cpu_total, cpu_pct, state))
        waits = out.get("thread_waits")
        if waits and out.get("top_thread_id") == pid:  # the main thread's state and wait, fresh from this tick (a
            # quiet process's threads are read every few seconds: their wait can be from before it began to wait)
            out["thread_waits"] = (main_thread_wait(state, channel, out.get("poll_wait"), out.get("write_target")),
                                   *waits[1:])
        out.update(self._limits.read(pid, now))
        out.update(_lock_holder(pid, out))
        t.last_time, t.last_cpu, t.last_io, t.last_stat = now, cpu_total, io, stat
        return out

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        wall = time.monotonic()
        details: dict[int, dict[str, Any]] = {}
        gpu_pids = set(pids)
        for pid in pids:
            d = self._details(pid, wall, gpu_pids)
            if d is not None:
                details[pid] = d
        for gone in set(self._tracked) - gpu_pids:  # processes that left the GPU: forget them
            self._forget(gone)
        feeders, upstream = self._feeders.poll(wall, details)  # who feeds the waiting ones
        for pid, where in upstream.items():
            details[pid]["upstream"] = where
        return Reading(host=self._host(), process_details=details, feeders=tuple(feeders))

    def _forget(self, pid: int) -> None:
        """Stop following ``pid``: its reading state and its (and its workers') held /proc files."""
        t = self._tracked.pop(pid, None)
        forget(pid)
        self._limits.forget(pid)
        for child in t.children if t is not None else ():
            forget(child)


def _lock_holder(pid: int, out: dict[str, Any]) -> dict[str, Any]:
    """Who holds the file lock the process waits on (its main thread's or a working thread's wait), from
    /proc/locks: read only while it waits on one."""
    channel = out.get("wait_channel")
    if "file_lock" not in (out.get("thread_waits") or ()) and \
            (channel is None or classify_wait("S", channel) != "file_lock"):
        return {}
    holder = read_lock_holder(pid)
    return {} if holder is None else {"file_lock_holder_pid": holder, "file_lock_holder_name": read_comm(holder)}


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except (psutil.AccessDenied, psutil.ZombieProcess, KeyError, OSError):
        return None
