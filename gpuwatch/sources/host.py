"""Host source (psutil + /proc): machine CPU, memory, iowait, and details for the processes on the GPUs.

It looks only at the pids the GPU sources found (never a walk over every process on the host), keeps
one psutil.Process per pid so CPU and IO are deltas between ticks, and reads each thread's CPU time so a
GIL-bound serving thread at 100 % of one core is visible even when the process total looks modest.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from gpuwatch.model.snapshot import HostSample
from gpuwatch.sources.base import Reading, Source

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_CONTAINER_RE = re.compile(r"([0-9a-f]{64})|(?:docker|crio|containerd|cri-containerd|libpod)[-:/]([0-9a-f]{12,64})")


def container_id_from_cgroup(text: str) -> str | None:
    """The container id in a ``/proc/PID/cgroup`` body (docker, containerd, cri-o, podman), or None."""
    for line in text.splitlines():
        m = _CONTAINER_RE.search(line)
        if m:
            return (m.group(1) or m.group(2))[:64]
    return None


def read_thread_stats(pid: int) -> dict[int, tuple[str, float]] | None:
    """``{tid: (state, cpu_seconds)}`` from /proc/PID/task/*/stat, or None where /proc is not there.

    The hot part of a tick (a serving process has 20-60 threads): plain ``os`` calls on string paths, about
    a third of the cost of ``open()`` on pathlib paths measured on the H200 host."""
    base = f"/proc/{pid}/task/"
    try:
        tids = os.listdir(base)
    except FileNotFoundError:
        return None if not os.path.exists("/proc/self") else {}
    except PermissionError:
        return {}
    out: dict[int, tuple[str, float]] = {}
    for tid in tids:
        try:
            fd = os.open(base + tid + "/stat", os.O_RDONLY)
        except OSError:
            continue
        try:
            raw = os.read(fd, 1024)
        except OSError:
            continue
        finally:
            os.close(fd)
        rest = raw[raw.rfind(b")") + 2:].split(maxsplit=14)  # the comm field may hold spaces and parentheses
        if len(rest) < 14:
            continue
        out[int(tid)] = (chr(rest[0][0]), (int(rest[11]) + int(rest[12])) / _CLK_TCK)
    return out


def read_children(pid: int, depth: int = 2) -> list[int]:
    """Descendant pids (children and grandchildren) from ``/proc/PID/task/*/children``: no walk over every
    process on the host, as psutil's ``children()`` would make."""
    out: list[int] = []
    base = f"/proc/{pid}/task/"
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(base + tid + "/children", "rb") as f:
                out.extend(int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
    if depth > 1:
        out.extend(grand for child in list(out) for grand in read_children(child, depth - 1))
    return out


def read_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a whole process from ``/proc/PID/stat``."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = os.read(fd, 1024)
    except OSError:
        return None
    finally:
        os.close(fd)
    rest = raw[raw.rfind(b")") + 2:].split(maxsplit=14)
    return (int(rest[11]) + int(rest[12])) / _CLK_TCK if len(rest) >= 14 else None


def read_wait_channel(pid: int) -> str | None:
    """Where the main thread sleeps in the kernel, or None (running, hidden, or not readable)."""
    try:
        with open(f"/proc/{pid}/wchan", "rb") as f:
            text = f.read(128).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if text and text != "0" else None


@dataclass
class _Tracked:
    proc: psutil.Process
    static: dict[str, Any]
    last_time: float
    last_cpu: float
    last_io: tuple[int, int, int, int] | None
    last_threads: dict[int, float] = field(default_factory=dict)
    #: Worker child pid -> CPU seconds at the last tick; refreshed every CHILDREN_EVERY_S.
    children: dict[int, float] = field(default_factory=dict)
    children_at: float = float("-inf")


CHILDREN_EVERY_S = 2.0
BUSY_WORKER = 80.0


class HostSource(Source):
    name = "host"
    role = "host"
    deadline_s = 2.0

    def __init__(self) -> None:
        # In a Kubernetes pod the hostname is the pod's; the DaemonSet passes the node's name as NODE_NAME
        # (as for dcgm-exporter), so series and alerts name the machine.
        self.hostname = os.environ.get("NODE_NAME") or socket.gethostname()
        self._tracked: dict[int, _Tracked] = {}
        self._last_cpu_times: list[Any] | None = None
        self._cpu_count = psutil.cpu_count() or None

    # -- the machine -------------------------------------------------------------------------------------
    def _host(self) -> HostSample:
        times = psutil.cpu_times(percpu=True)
        per_cpu: tuple[float, ...] = ()
        total = iowait = None
        if self._last_cpu_times is not None and len(self._last_cpu_times) == len(times):
            busy_sum = all_sum = io_sum = 0.0
            pcts = []
            for old, new in zip(self._last_cpu_times, times, strict=False):
                d_all = sum(new) - sum(old)
                d_idle = (new.idle - old.idle) + (getattr(new, "iowait", 0.0) - getattr(old, "iowait", 0.0))
                d_io = getattr(new, "iowait", 0.0) - getattr(old, "iowait", 0.0)
                pcts.append(round(100.0 * (d_all - d_idle) / d_all, 1) if d_all > 0 else 0.0)
                busy_sum += d_all - d_idle
                all_sum += d_all
                io_sum += d_io
            per_cpu = tuple(pcts)
            if all_sum > 0:
                total = round(100.0 * busy_sum / all_sum, 2)
                iowait = round(100.0 * io_sum / all_sum, 2)
        self._last_cpu_times = times
        vm = psutil.virtual_memory()
        try:
            load1, load5, load15 = os.getloadavg()
        except OSError:
            load1 = load5 = load15 = None  # type: ignore[assignment]
        return HostSample(hostname=self.hostname, cpu_count=self._cpu_count, cpu_percent=total,
                          per_cpu_percent=per_cpu, iowait_percent=iowait, load1=load1, load5=load5,
                          load15=load15, mem_total_bytes=vm.total, mem_used_bytes=vm.total - vm.available,
                          mem_available_bytes=vm.available)

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
                io = _io(proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return None
        except psutil.AccessDenied:
            return None
        try:
            static["container_id"] = container_id_from_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
        except OSError:
            static["container_id"] = None
        t = _Tracked(proc, static, now, cpu.user + cpu.system, io)
        t.last_threads = {tid: c for tid, (_, c) in (read_thread_stats(pid) or {}).items()}
        self._workers(t, pid, now, 0.0, gpu_pids)  # the baseline of its workers' CPU
        self._tracked[pid] = t
        return t

    def _workers(self, t: _Tracked, pid: int, now: float, dt: float, gpu_pids: set[int]) -> dict[str, Any]:
        """Child processes without a GPU context, and how hard they work (data-loader workers)."""
        if now - t.children_at >= CHILDREN_EVERY_S:
            t.children_at = now
            kids = [c for c in read_children(pid) if c not in gpu_pids]
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
        try:
            with t.proc.oneshot():
                cpu = t.proc.cpu_times()
                mem = t.proc.memory_info()
                status = t.proc.status()
                n_threads = t.proc.num_threads()
                io = _io(t.proc)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            self._tracked.pop(pid, None)
            return None
        except psutil.AccessDenied:
            return dict(t.static)
        dt = now - t.last_time
        cpu_total = cpu.user + cpu.system
        out = dict(t.static)
        out.update(rss_bytes=mem.rss, state=_STATE.get(status, status), num_threads=n_threads)
        if dt > 0:
            out["cpu_percent"] = round(100.0 * (cpu_total - t.last_cpu) / dt, 1)
            if io is not None and t.last_io is not None:
                rates = [max(0.0, (new - old) / dt) for new, old in zip(io, t.last_io, strict=True)]
                out.update(io_read_bytes_s=rates[0], io_write_bytes_s=rates[1],
                           io_read_chars_s=rates[2], io_write_chars_s=rates[3])
        out.update(self._workers(t, pid, now, dt, gpu_pids))
        out["wait_channel"] = read_wait_channel(pid)
        threads = read_thread_stats(pid)
        if threads is not None:
            out["threads_in_io_wait"] = sum(1 for state, _ in threads.values() if state == "D")
            out["threads_running"] = sum(1 for state, _ in threads.values() if state == "R")
            if dt > 0 and threads:
                best_tid, best = max(((tid, c - t.last_threads.get(tid, c)) for tid, (_, c) in threads.items()),
                                     key=lambda x: x[1])
                out["top_thread_cpu_percent"] = round(100.0 * best / dt, 1)
                out["top_thread_id"] = best_tid
            t.last_threads = {tid: c for tid, (_, c) in threads.items()}
        t.last_time, t.last_cpu, t.last_io = now, cpu_total, io
        return out

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        wall = time.monotonic()
        details: dict[int, dict[str, Any]] = {}
        gpu_pids = set(pids)
        for pid in pids:
            d = self._details(pid, wall, gpu_pids)
            if d is not None:
                details[pid] = d
        for gone in set(self._tracked) - set(pids):  # processes that left the GPU: forget them
            del self._tracked[gone]
        return Reading(host=self._host(), process_details=details)


_STATE = {psutil.STATUS_RUNNING: "R", psutil.STATUS_SLEEPING: "S", psutil.STATUS_DISK_SLEEP: "D",
          psutil.STATUS_STOPPED: "T", psutil.STATUS_ZOMBIE: "Z", psutil.STATUS_IDLE: "I"}


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except (psutil.AccessDenied, psutil.ZombieProcess, KeyError, OSError):
        return None


def _io(proc: psutil.Process) -> tuple[int, int, int, int] | None:
    """Storage bytes read/written, and all bytes passed through read/write calls (Linux's rchar/wchar)."""
    try:
        c = proc.io_counters()
    except (psutil.AccessDenied, AttributeError, OSError):
        return None
    return (c.read_bytes, c.write_bytes, getattr(c, "read_chars", 0), getattr(c, "write_chars", 0))
