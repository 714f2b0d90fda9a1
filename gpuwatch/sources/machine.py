"""The machine's CPU and memory counters straight from /proc/stat and /proc/meminfo.

The host source reads these every tick. psutil's ``cpu_times()`` and ``virtual_memory()`` parse the files
whole into named tuples; the tick needs three numbers of the aggregate ``cpu`` line, ``procs_running`` and two
meminfo lines, which one read and a split give at a fraction of the cost. Both files stay open between ticks
(:mod:`held_files`).
"""

from __future__ import annotations

from typing import NamedTuple

from gpuwatch.sources import held_files


class CpuJiffies(NamedTuple):
    """The machine's CPU counters since boot (all its CPUs summed), in clock ticks: all time (guest time is
    already in user), idle time (idle + iowait) and iowait alone."""

    total: int
    idle: int
    iowait: int


def parse_cpu_jiffies(raw: bytes) -> CpuJiffies:
    """The whole machine's counters: the aggregate ``cpu`` line, the first of a /proc/stat body (the kernel
    sums every CPU's into it; the per-CPU lines after it, hundreds on a large host, are not parsed).

    Fields: user nice system idle iowait irq softirq steal [guest guest_nice]; guest time is counted
    in user already, so the total stops at steal."""
    line = raw[:raw.find(b"\n")] if b"\n" in raw else raw
    if not line.startswith(b"cpu "):
        raise ValueError("/proc/stat does not start with the aggregate cpu line")
    values = list(map(int, line.split()[1:9]))
    iowait = values[4] if len(values) > 4 else 0
    return CpuJiffies(sum(values), values[3] + iowait, iowait)


def parse_procs_running(raw: bytes) -> int | None:
    """``procs_running`` of a /proc/stat body: threads running or waiting for a core right now."""
    at = raw.find(b"\nprocs_running ")
    if at < 0:
        return None
    try:
        return int(raw[at + 15:raw.find(b"\n", at + 1)].strip() or b"x")
    except ValueError:
        return None


def read_cpu_stat() -> tuple[CpuJiffies, int | None]:
    """The machine's CPU counters and ``procs_running`` from one read of /proc/stat."""
    raw = held_files.read_whole(0, "/proc/stat")
    return parse_cpu_jiffies(raw), parse_procs_running(raw)


def parse_meminfo(raw: bytes) -> tuple[int, int] | None:
    """(MemTotal, MemAvailable) in bytes from a /proc/meminfo body; None without MemAvailable (kernels
    before 3.14), where the caller asks psutil, which estimates it."""
    total, available = _kib(raw, b"MemTotal:"), _kib(raw, b"MemAvailable:")
    return None if total is None or available is None else (total, available)


def _kib(raw: bytes, name: bytes) -> int | None:
    """The value of line ``name`` (at the start of a line) of a meminfo body, in bytes."""
    if raw.startswith(name):
        at = 0
    elif (at := raw.find(b"\n" + name) + 1) == 0:
        return None
    end = raw.find(b"\n", at)
    try:
        return int(raw[at + len(name):end if end >= 0 else None].split()[0]) * 1024
    except (IndexError, ValueError):
        return None


def read_meminfo() -> tuple[int, int] | None:
    return parse_meminfo(held_files.read_whole(0, "/proc/meminfo"))
