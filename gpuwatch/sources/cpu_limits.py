"""How many cores a process may use, and how often its cgroup's quota stopped it: what tells "the host has
no core to spare" from "the process's own limit has none" (a Kubernetes pod's CPU limit, a cpuset, taskset).

Why it matters: libraries size their thread pools by the host's cores (torch and OpenMP, BLAS, tokenizers,
DataLoader defaults), not by a quota, so sixteen threads under a two-core quota use it up early in each
100 ms period and then all wait for the next one: the feeding thread waits for a core on a host whose cores
are idle, and neither the host's load nor the process's CPU shows why.

Read from the kernel's own files, each cheap: the CPU affinity (``sched_getaffinity``, which a cpuset also
narrows), the CFS bandwidth quota of the process's cgroup and of every cgroup above it (``cpu.max`` in
cgroup v2, ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` in v1; the smallest binds), and the binding
cgroup's count of periods it ran in and was throttled in (``cpu.stat``: ``nr_periods``, ``nr_throttled``).
A process's cgroup path is read in the reader's cgroup namespace, so a daemon on the host (or in a pod sharing
the host's cgroup namespace, with the host's /sys/fs/cgroup) sees a pod's; one in a namespace of its own sees
other pods' paths as ``/../..``, outside what it can read: their quotas are not read (their affinity still is).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from gpuwatch.model.process_sample import CPU_AFFINITY, CPU_QUOTA
from gpuwatch.sources import held_files
from gpuwatch.sources.netfds import read_comm
from gpuwatch.sources.procfs import read_cpu_seconds

CGROUP_ROOT = "/sys/fs/cgroup"
#: Seconds between reads of the limits themselves (affinity, quotas); the throttle counter is read every tick.
LIMITS_EVERY_S = 10.0
#: The other processes under the binding quota that are named: the busiest, each at 10 % of a core or more
#: (a sidecar, a log shipper, the process's own workers), and how many members of the cgroup are read at most.
PEERS_NAMED = 3
PEER_CPU = 10.0
MEMBERS_READ = 64


def cgroup_dirs(cgroup_text: str, root: str = CGROUP_ROOT) -> list[str]:
    """The directories of a process's CPU cgroup and every one above it, innermost first, from the body of
    its ``/proc/PID/cgroup``: the v2 line (``0::/path``) or the v1 line whose controllers include ``cpu``
    (mounted at ``cpu,cpuacct`` or ``cpu``). Empty when neither is there."""
    for line in cgroup_text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            base = root
        elif "cpu" in controllers.split(","):
            base = next((os.path.join(root, name) for name in (controllers, "cpu,cpuacct", "cpu")
                         if os.path.isdir(os.path.join(root, name))), "")
        else:
            continue
        if not base or not path.startswith("/"):
            continue
        parts = [p for p in path.split("/") if p]
        if ".." in parts:  # outside the reader's cgroup namespace: not under its /sys/fs/cgroup
            return []
        return [os.path.join(base, *parts[:n]) for n in range(len(parts), -1, -1)]
    return []


def _read(path: str, size: int = 256) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read(size)
    except OSError:
        return None


def quota_cores(directory: str) -> float | None:
    """The CPU quota of one cgroup in cores (quota over period), or None where it has none."""
    v2 = _read(os.path.join(directory, "cpu.max"))
    if v2 is not None:
        fields = v2.split()
        quota, period = [*fields, "", ""][:2]
    else:
        quota = (_read(os.path.join(directory, "cpu.cfs_quota_us")) or "").strip()
        period = (_read(os.path.join(directory, "cpu.cfs_period_us")) or "").strip()
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None  # "max", -1 in v1 (no quota), or not readable
    return q / p if q > 0 and p > 0 else None


def throttle_counts(stat: bytes) -> tuple[int, int] | None:
    """``(nr_periods, nr_throttled)`` from a ``cpu.stat`` body, or None where it has no bandwidth fields."""
    found: dict[bytes, int] = {}
    for line in stat.splitlines():
        key, _, value = line.partition(b" ")
        if key in (b"nr_periods", b"nr_throttled"):
            try:
                found[key] = int(value)
            except ValueError:
                return None
    return (found[b"nr_periods"], found[b"nr_throttled"]) if len(found) == 2 else None


def cgroup_members(directory: str, limit: int = MEMBERS_READ) -> list[int]:
    """The processes in a cgroup and every cgroup below it (a pod's quota binds its containers' processes
    too), at most ``limit``."""
    found: list[int] = []
    for here, _, _ in os.walk(directory):
        body = _read(os.path.join(here, "cgroup.procs"), -1) or ""
        found.extend(int(line) for line in body.split() if line.isdigit())
        if len(found) >= limit:
            break
    return found[:limit]


def affinity_cores(pid: int) -> int | None:
    try:
        return len(os.sched_getaffinity(pid))
    except (AttributeError, OSError):  # not Linux, or the process is gone
        return None


def _release_stat(peer: int) -> None:
    """Close the stat file a peer's CPU was read from, and only that (the host source may follow it too)."""
    held_files.release(peer, f"/proc/{peer}/stat")


@dataclass
class _Limit:
    dirs: list[str]
    cores: float | None = None
    by: str | None = None
    #: The ``cpu.stat`` of the cgroup whose quota binds (None: no quota binds).
    stat: str | None = None
    read_at: float = float("-inf")
    counts: tuple[int, int] | None = None
    #: The binding cgroup's other processes: pid -> (CPU seconds, when read), and their names.
    peers: dict[int, tuple[float, float]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    #: What the last refresh found of them (the ``cpu_limit_peer_*`` fields).
    shown: dict[str, Any] = field(default_factory=dict)


class CpuLimits:
    """Per followed process: its CPU limit below the host's cores and its cgroup's throttling, as the
    :class:`~gpuwatch.model.process_sample.ProcessSample` fields ``cpu_limit_cores``, ``cpu_limit_by`` and
    ``cpu_throttled_percent``."""

    def __init__(self, host_cores: int | None = None, every_s: float = LIMITS_EVERY_S) -> None:
        self.host_cores = host_cores or os.cpu_count() or 1
        self.every_s = every_s
        self._limits: dict[int, _Limit] = {}

    def track(self, pid: int, cgroup_text: str | None, root: str = CGROUP_ROOT) -> None:
        self._limits[pid] = _Limit(cgroup_dirs(cgroup_text or "", root))

    def forget(self, pid: int) -> None:
        limit = self._limits.pop(pid, None)
        for peer in limit.peers if limit is not None else ():
            _release_stat(peer)

    def read(self, pid: int, now: float) -> dict[str, Any]:
        limit = self._limits.get(pid)
        if limit is None:
            return {}
        if now - limit.read_at >= self.every_s:
            self._refresh(pid, limit, now)
            limit.read_at = now
        out: dict[str, Any] = {"cpu_limit_cores": limit.cores, "cpu_limit_by": limit.by}
        if limit.stat is not None:
            try:
                counts = throttle_counts(held_files.read(pid, limit.stat))
            except OSError:
                counts = None
            before, limit.counts = limit.counts, counts
            if before is not None and counts is not None:
                periods = counts[0] - before[0]
                out["cpu_throttled_percent"] = round(100.0 * (counts[1] - before[1]) / periods, 1) if periods > 0 \
                    else 0.0
            out.update(limit.shown)
        return out

    @staticmethod
    def _peers(limit: _Limit, now: float) -> dict[str, Any]:
        """The busiest other processes under the binding quota, CPU since the last refresh (``every_s``: a pod
        may hold dozens of processes, so they are not read every tick), percent of a core."""
        busy: list[tuple[float, int]] = []
        for peer, (before, at) in list(limit.peers.items()):
            seconds = read_cpu_seconds(peer)
            if seconds is None:
                del limit.peers[peer]
                continue
            limit.peers[peer] = (seconds, now)
            if now > at and (cpu := 100.0 * (seconds - before) / (now - at)) >= PEER_CPU:
                busy.append((cpu, peer))
        busy.sort(reverse=True)
        shown = busy[:PEERS_NAMED]
        if not shown:
            return {}
        return {"cpu_limit_peer_pids": tuple(p for _, p in shown),
                "cpu_limit_peer_names": tuple(limit.names.setdefault(p, read_comm(p) or "?") for _, p in shown),
                "cpu_limit_peer_cpu_percents": tuple(round(c, 1) for c, _ in shown)}

    def _refresh(self, pid: int, limit: _Limit, now: float) -> None:
        quotas = [(q, d) for d in limit.dirs if (q := quota_cores(d)) is not None]
        quota, binding = min(quotas) if quotas else (None, None)
        pinned = affinity_cores(pid)
        cores: float | None = None
        by = None
        if quota is not None and quota < self.host_cores:
            cores, by = round(quota, 2), CPU_QUOTA
        if pinned is not None and pinned < self.host_cores and (cores is None or pinned < cores):
            cores, by = float(pinned), CPU_AFFINITY
        stat = None if binding is None else os.path.join(binding, "cpu.stat")
        if stat != limit.stat:
            if limit.stat is not None:
                held_files.release(pid, limit.stat)
            limit.stat, limit.counts = stat, None
        limit.cores, limit.by = cores, by
        limit.shown = self._peers(limit, now)
        members = set(cgroup_members(os.path.dirname(stat))) - {pid} if stat is not None else set()
        for gone in set(limit.peers) - members:
            del limit.peers[gone]
            limit.names.pop(gone, None)
            _release_stat(gone)
        for new in members - set(limit.peers):
            if (seconds := read_cpu_seconds(new)) is not None:
                limit.peers[new] = (seconds, now)
