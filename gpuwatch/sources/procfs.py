"""Reads of /proc for the host source: plain ``os`` calls on string paths, one read per file.

A tick reads these for every process on the GPUs and every thread of the busy ones, so each is as cheap
as a read can be (psutil's equivalents open several files and build objects for fields we do not use).
The files read again and again (a process's stat, io and wait channel, its threads' stat and schedstat)
stay open between reads (:mod:`held_files`); ``forget`` closes those of a process or thread no longer
followed.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable
from typing import NamedTuple

from gpuwatch.sources import held_files

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_CONTAINER_RE = re.compile(r"([0-9a-f]{64})|(?:docker|crio|containerd|cri-containerd|libpod)[-:/]([0-9a-f]{12,64})")


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: Per reading thread: pid -> its threads that slept at the last read of them all (see read_thread_stats),
#: and what the last read of its threads' children found (see read_children).
_slept = threading.local()
#: Every thread's children file is read at least this often (see read_children): with the host source's
#: reads of them all every 30 s, every fourth reads each file.
CHILDREN_REREAD_S = 120.0


def _read_small(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _stat_fields(raw: bytes, at_least: int) -> list[bytes] | None:
    """The fields of a ``stat`` file after the command name (which may hold spaces and parentheses), from
    the state letter on; None when fewer than ``at_least``."""
    rest = raw[raw.rfind(b")") + 2:].split(maxsplit=at_least + 1)
    return rest if len(rest) >= at_least else None


def _cpu_seconds(fields: list[bytes]) -> float:
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def container_id_from_cgroup(text: str) -> str | None:
    """The container id in a ``/proc/PID/cgroup`` body (docker, containerd, cri-o, podman), or None."""
    for line in text.splitlines():
        m = _CONTAINER_RE.search(line)
        if m:
            return (m.group(1) or m.group(2))[:64]
    return None


def read_thread_stats(pid: int, tids: Iterable[int] | None = None) -> dict[int, tuple[str, float]] | None:
    """``{tid: (state, cpu_seconds)}`` from /proc/PID/task/*/stat (only ``tids`` when given; those that
    ended are left out), or None where /proc is not there.

    The hot part of a tick (a serving process has 20-60 threads): plain ``os`` calls on string paths, about
    a third of the cost of ``open()`` on pathlib paths measured on the H200 host. Reading every thread
    (``tids`` None), a thread that slept at the last such read and has not run since (its schedstat, run
    time and timeslices, unchanged: a quarter of the kernel's work of its stat file) is still asleep with
    the same CPU, so its stat file is not read again. The one state this cannot see is a thread woken
    and not yet given a core, which shows as running once it has run (the next read)."""
    base = f"/proc/{pid}/task/"
    if tids is None:
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            return None if not os.path.exists("/proc/self") else {}
        except PermissionError:
            return {}
        slept = _slept_of(pid)
    else:
        names = [str(tid) for tid in tids]
        slept = None
    out: dict[int, tuple[str, float]] = {}
    read = held_files.read
    for name in names:
        tid = int(name)
        runs = None
        if slept is not None:
            runs = _schedstat(pid, base + name)
            known = slept.get(tid)
            if known is not None and known[0] == runs:
                out[tid] = known[1]
                continue
        try:
            raw = read(pid, base + name + "/stat")
        except OSError:
            continue
        fields = _stat_fields(raw, 14)
        if fields is None:
            continue
        found = out[tid] = (chr(fields[0][0]), _cpu_seconds(fields))
        if slept is not None:
            if runs is not None and found[0] == "S":
                slept[tid] = (runs, found)
            else:
                slept.pop(tid, None)
    if slept is not None:
        for ended in set(slept).difference(out):
            del slept[ended]
    return out


def _schedstat(pid: int, task: str) -> bytes | None:
    """A thread's schedstat (its time on a CPU moves whenever it runs), None where it cannot be read."""
    try:
        return held_files.read(pid, task + "/schedstat")
    except OSError:
        return None


def _slept_of(pid: int) -> dict[int, tuple[bytes, tuple[str, float]]]:
    """``pid``'s threads that slept at the last read of them all: tid -> (its schedstat then, what its stat
    said). Kept per reading thread, like the held files."""
    try:
        by_pid: dict[int, dict[int, tuple[bytes, tuple[str, float]]]] = _slept.by_pid
    except AttributeError:
        by_pid = _slept.by_pid = {}
    found = by_pid.get(pid)
    if found is None:
        found = by_pid[pid] = {}
    return found


def read_run_wait(pid: int, tid: int) -> float | None:
    """Seconds thread ``tid`` has spent runnable but waiting for a core (``/proc/PID/task/TID/schedstat``,
    field 2, in ns), or None where the kernel keeps no scheduler statistics. Its rate is the time a thread
    wanted a CPU and got none: the signature of an oversubscribed host."""
    try:
        fields = held_files.read(pid, f"/proc/{pid}/task/{tid}/schedstat").split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def read_thread_wait_channel(pid: int, tid: int) -> str | None:
    """Where thread ``tid`` sleeps in the kernel (``/proc/PID/task/TID/wchan``), or None."""
    return _wchan(pid, f"/proc/{pid}/task/{tid}/wchan")


def read_children(pid: int, depth: int = 2, tids: Iterable[int] | None = None) -> list[int]:
    """Descendant pids (children and grandchildren) from ``/proc/PID/task/*/children`` (only the threads
    ``tids`` of ``pid`` itself when given): no walk over every process on the host, as psutil's
    ``children()`` would make.

    Reading every thread of ``pid``, a thread that has not run since the last such read (its schedstat
    unchanged) has started no process, so its children are those it had (less any that ended, which the
    callers find gone). A thread that ended hands its children to another, which need not run: then every
    thread is read again, as it is at least every CHILDREN_REREAD_S (a process that reaps orphans, a
    subreaper, can gain children without running)."""
    return _children(pid, depth, tids, top=True)


def _children(pid: int, depth: int, tids: Iterable[int] | None, top: bool = False) -> list[int]:
    out: list[int] = []
    base = f"/proc/{pid}/task/"
    known = None
    if tids is None:
        try:
            names = os.listdir(base)
        except OSError:
            return out
        if top:
            known = _kids_of(pid, names)
    else:
        names = [str(tid) for tid in tids]
    for name in names:
        runs = None
        if known is not None:
            runs = _schedstat(pid, base + name)
            last = known.get(name)
            if last is not None and last[0] == runs:
                out.extend(last[1])
                continue
        try:
            raw = _read_small(base + name + "/children")
            kids = [int(x) for x in raw.split()] if raw else []
        except (OSError, ValueError):
            continue
        out.extend(kids)
        if known is not None and runs is not None:
            known[name] = (runs, kids)
    if depth > 1:
        out.extend(grand for child in list(out) for grand in _children(child, depth - 1, None))
    return out


def _kids_of(pid: int, names: list[str]) -> dict[str, tuple[bytes, list[int]]]:
    """What the last read of every thread's children of ``pid`` found (thread -> its schedstat then, its
    children), emptied when a thread has ended since or CHILDREN_REREAD_S has passed."""
    try:
        by_pid: dict[int, tuple[float, dict[str, tuple[bytes, list[int]]]]] = _slept.kids
    except AttributeError:
        by_pid = _slept.kids = {}
    now = time.monotonic()
    entry = by_pid.get(pid)
    if entry is None or now - entry[0] >= CHILDREN_REREAD_S or not set(entry[1]).issubset(names):
        entry = by_pid[pid] = (now, {})
    return entry[1]


def read_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a whole process from ``/proc/PID/stat``."""
    try:
        fields = _stat_fields(held_files.read(pid, f"/proc/{pid}/stat"), 14)
    except OSError:
        return None
    return None if fields is None else _cpu_seconds(fields)


class ProcessStat(NamedTuple):
    """One read of ``/proc/PID/stat``. A major fault (``majflt``) is a page the process touched that had to be
    read from storage: the wait of a memory-mapped file whose pages are not resident, which no read call shows.
    A minor fault (``minflt``) is a page mapped without reading anything: memory touched for the first time,
    which the kernel zeroes; with the system time (``stime``) it says the CPU went to the kernel, not the code."""

    state: str
    cpu_seconds: float
    system_seconds: float
    threads: int
    rss_bytes: int
    major_faults: int
    minor_faults: int


def read_process_stat(pid: int) -> ProcessStat | None:
    """The process's :class:`ProcessStat`; None when it is gone. One read where psutil's
    cpu_times/status/num_threads/memory_info make three."""
    try:
        raw = held_files.read(pid, f"/proc/{pid}/stat")
    except OSError:
        return None
    fields = _stat_fields(raw, 22)
    if fields is None:
        return None
    return ProcessStat(chr(fields[0][0]), _cpu_seconds(fields), int(fields[12]) / _CLK_TCK, int(fields[17]),
                       int(fields[21]) * _PAGE, int(fields[9]), int(fields[7]))


def read_process_io(pid: int) -> tuple[int, int, int, int] | None:
    """Storage bytes read/written and bytes through read/write calls (read_bytes, write_bytes, rchar,
    wchar) from ``/proc/PID/io``; None where it cannot be read (another user's process without privilege)."""
    try:
        raw = held_files.read(pid, f"/proc/{pid}/io")
    except OSError:
        return None
    # rchar, wchar, syscr, syscw, read_bytes, write_bytes, cancelled_write_bytes: one "name: value" per line
    values = raw.split()
    try:
        return (int(values[values.index(b"read_bytes:") + 1]), int(values[values.index(b"write_bytes:") + 1]),
                int(values[values.index(b"rchar:") + 1]), int(values[values.index(b"wchar:") + 1]))
    except (IndexError, ValueError):
        return None


def read_wait_channel(pid: int) -> str | None:
    """Where the main thread sleeps in the kernel, or None (running, hidden, or not readable)."""
    return _wchan(pid, f"/proc/{pid}/wchan")


def _wchan(pid: int, path: str) -> str | None:
    try:
        text = held_files.read(pid, path).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if text and text != "0" else None


def forget(pid: int) -> None:
    """Close the held files of process ``pid`` and its threads, and drop what was known of them: it is no
    longer followed."""
    held_files.release(pid)
    getattr(_slept, "by_pid", {}).pop(pid, None)
    getattr(_slept, "kids", {}).pop(pid, None)


def forget_threads(pid: int, tids: Iterable[int]) -> None:
    """Close the held files of the threads ``tids`` of ``pid``: they ended."""
    for tid in tids:
        held_files.release(pid, f"/proc/{pid}/task/{tid}/")
