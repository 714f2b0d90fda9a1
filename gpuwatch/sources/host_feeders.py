"""Follow the wait: the processes that feed a GPU process whose threads wait, and where its work comes from.

A GPU process whose busiest thread is off the CPU waits for something: a pipe, a queue fed by other processes, a
socket. Every FEEDERS_EVERY_S (only for such processes; every FEEDERS_QUIET_EVERY_S when that thread sleeps in a
timer, waits on the GPU, or has not waited on a feeder lately) its links are read: its children and grandchildren
(its own workers: always its feeders), and which of its siblings (same parent, when the parent is not init) or
its parent share a pipe, a socket or a shared-memory segment with it (``/proc/PID/fd``), or are at the other end
of its unix sockets (the kernel's sock_diag) or loopback TCP connections (a process outside the tree at the other
end of one, such as a detached feature service, is a ``peer``; :mod:`socket_links` keeps what did not change).
A sibling that shares none of these is not a feeder: a launcher, a shell or a container's init starts unrelated
programs side by side, and one of them being busy says nothing about what the GPU process waits for (listed,
a busy neighbour could be named the bottleneck, and a dozen of them were a fifth of the daemon's CPU beside four
torch processes on the H200). Its sockets and those of the tree processes it is
linked to say whether work comes from outside its process tree (a listening socket, or an accepted connection
whose other end is not in the tree: ``external``; a front end at the other end of one of its sockets that listens
counts), from its tree only (``tree``), or cannot be told (``unknown``). A scan that finds the same family
(children, siblings, parent) and the same pipes, sockets and shared memory of its own as the last whole scan keeps
that scan's links without listing every sibling's fd table, for up to FEEDERS_QUIET_EVERY_S: a link needs one of
those on its side, or a process that was not there. Between scans the links are kept, and every feeder is read like a
GPU process's host side (CPU, busiest thread, thread wait classes, run-queue delay, threads in D state, storage
I/O rates) at most every FEEDER_READ_EVERY_S while a GPU process it feeds has waited on something a feeder can
supply (a pipe, a socket, a lock, I/O) in the last FEEDER_QUIET_READ_EVERY_S, else every FEEDER_QUIET_READ_EVERY_S
(a process whose busiest thread runs, sleeps in a timer or waits on the GPU waits for no feeder, so the doctor has
little use for finer readings; reading each feeder's threads was the largest part of the host source's cost beside
such processes). A feeder found stays listed every tick, with its last reading.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from gpuwatch.model.feeders import FeederSample, Relation, Upstream
from gpuwatch.sources import netfds
from gpuwatch.sources.host_threads import ThreadTracker
from gpuwatch.sources.procfs import forget, read_children, read_process_io, read_process_stat
from gpuwatch.sources.socket_links import SocketLinks

FEEDERS_EVERY_S = 5.0
#: A GPU process whose busiest thread sleeps in a timer or waits in the GPU driver, or has not waited on a
#: feeder lately, waits for no other process: its links are read again this seldom (a scan lists every
#: sibling's fd table and reads its own whole: about 8 ms beside four torch processes on the H200, a quarter
#: of the daemon's CPU at 30 s). Nothing waits on it: the tick it starts waiting on a feeder, its links are
#: read again at once (``FEEDERS_EVERY_S`` has passed since this scan).
FEEDERS_QUIET_EVERY_S = 60.0
#: A feeder is read at most this often (its rates over that span); the ticks between give the last reading.
#: Eight GPU ranks with eight loader workers each are 64 feeders: read every tick they would cost more than
#: the rest of the host source.
FEEDER_READ_EVERY_S = 2.0
#: A feeder of GPU processes none of which waited on a feeder lately (see ``waits_on_feeder``) is read this
#: seldom (its rates over that span).
FEEDER_QUIET_READ_EVERY_S = 10.0
#: A GPU process whose busiest thread uses less of a core than this is waiting on something.
WAITING_THREAD_CPU = 80.0
#: Feeders kept per GPU process (linked ones first, then children), and siblings looked at.
MAX_FEEDERS = 16
MAX_SIBLINGS = 64


@dataclass
class _Feeder:
    pid: int
    name: str | None
    cmdline: str | None
    threads: ThreadTracker
    last_time: float = 0.0
    last_cpu: float | None = None
    last_io: tuple[int, int, int, int] | None = None
    #: The last reading, given again until FEEDER_READ_EVERY_S has passed.
    held: FeederSample | None = None


@dataclass
class _Links:
    at: float
    upstream: Upstream
    relations: dict[int, Relation] = field(default_factory=dict)
    peers: list[int] = field(default_factory=list)
    #: What the links were read from (its family, its pipes, sockets and shared memory), and when they were
    #: read whole.
    shape: tuple[_Family, netfds.Fds] | None = None
    scanned_at: float = 0.0


def waiting(details: dict[str, Any]) -> bool:
    """Whether a GPU process's busiest thread is off the CPU enough to be waiting on something."""
    top = details.get("top_thread_cpu_percent")
    if top is None:
        top = details.get("cpu_percent")
    return top is not None and top < WAITING_THREAD_CPU


def quiet(details: dict[str, Any]) -> bool:
    """Whether a GPU process's busiest thread waits on something no other process feeds (a timer, the GPU)."""
    waits: tuple[str, ...] = tuple(details.get("thread_waits") or ())
    return bool(waits) and waits[0] in ("sleep", "gpu")


def waits_on_feeder(details: dict[str, Any]) -> bool:
    """Whether a GPU process's busiest thread waits on something another process can supply (not running,
    not sleeping in a timer, not waiting on the GPU); unknown waits count as such."""
    waits: tuple[str, ...] = tuple(details.get("thread_waits") or ())
    return not waits or waits[0] not in ("cpu", "sleep", "gpu")


@dataclass(frozen=True)
class _Family:
    """The processes around a GPU process: children and grandchildren, siblings (at most MAX_SIBLINGS), and
    its parent (None: init, or gpuwatch itself), none of them a GPU process or gpuwatch."""

    kids: tuple[int, ...]
    sibs: tuple[int, ...]
    ppid: int | None


def family(pid: int, ppid: int | None, gpu_pids: set[int]) -> _Family:
    me = os.getpid()
    kids = [c for c in dict.fromkeys(read_children(pid, depth=2)) if c not in gpu_pids and c not in (pid, me)]
    sibs: list[int] = []
    if ppid == me:  # started by gpuwatch itself (validate): its other children are gpuwatch's (py-spy)
        ppid = None
    if ppid is not None and ppid > 1:
        sibs = [s for s in read_children(ppid, depth=1) if s not in gpu_pids and s not in (pid, me)][:MAX_SIBLINGS]
    return _Family(tuple(kids), tuple(sibs), ppid if ppid is not None and ppid > 1 else None)


def links(pid: int, around: _Family, own: netfds.Fds | None, gpu_pids: set[int], view: SocketLinks,
          now: float) -> tuple[Upstream, dict[int, Relation], list[int]]:
    """Where ``pid``'s work comes from, its feeders with how each relates to it (see the module doc: its
    children, and the siblings, parent and peers that share a pipe, a socket or shared memory with it) and the
    processes at the other end of its sockets (``view`` keeps what did not change since the last scan), from its
    family and its own fds (``own``; None: not readable, and only its children are named). gpuwatch itself is
    never a feeder."""
    kids, sibs, ppid = list(around.kids), list(around.sibs), around.ppid
    relations: dict[int, Relation] = {}
    linked: list[int] = []
    if own is not None:
        members: dict[int, Relation] = {**{s: "sibling" for s in sibs}, **{k: "child" for k in kids}}
        if ppid is not None and ppid not in gpu_pids:
            members.setdefault(ppid, "peer")
        held: dict[int, int] = {}
        by_socket: list[int] = []
        # its own stdout and stderr link it to no sibling or child (they inherit them); its parent may read them
        fed_through = own.pipes - netfds.output_pipes(pid)
        for member in members:
            fds = view.fds(member, now)
            if fds is None:
                continue
            held.update((inode, member) for inode in fds.sockets)
            if fds.pipes & (own.pipes if members[member] == "peer" else fed_through) or fds.sockets & own.sockets \
                    or fds.shared & own.shared:
                linked.append(member)
            if fds.sockets & own.sockets:
                by_socket.append(member)
        upstream, peers = view.classify(pid, own, held, by_socket, gpu_pids | {pid}, now)
        for p in peers:
            members.setdefault(p, "peer")  # a process outside the tree at the other end of a connection
        linked += [p for p in peers if p not in linked]
        relations.update((m, members[m]) for m in linked)
    else:
        upstream, peers = "unknown", []
    for p in kids:
        relations.setdefault(p, "child")
    return upstream, dict(list(relations.items())[:MAX_FEEDERS]), peers


class FeederTracker:
    """The links of each waiting GPU process (read every FEEDERS_EVERY_S) and its feeders' readings each tick."""

    def __init__(self) -> None:
        self._links: dict[int, _Links] = {}
        self._feeders: dict[int, _Feeder] = {}
        self._view = SocketLinks()
        #: (feeder, fed) -> (the reading it was made from, the reading as that process's feeder).
        self._shaped: dict[tuple[int, int], tuple[FeederSample, FeederSample]] = {}
        #: GPU process -> when its busiest thread last waited on something a feeder can supply.
        self._fed_at: dict[int, float] = {}

    def poll(self, now: float, details: dict[int, dict[str, Any]]) -> tuple[list[FeederSample], dict[int, str]]:
        """Feeders of the GPU processes in ``details`` (pid -> its host fields this tick), and their upstream."""
        gpu_pids = set(details)
        for pid in set(self._links) - gpu_pids:
            del self._links[pid]
        for pid in set(self._fed_at) - gpu_pids:
            del self._fed_at[pid]
        for pid, d in details.items():
            if waits_on_feeder(d):
                self._fed_at[pid] = now
        for pid, d in details.items():
            known = self._links.get(pid)
            scan_every = FEEDERS_EVERY_S if self._fed(pid, now) and not quiet(d) else FEEDERS_QUIET_EVERY_S
            if known is not None and now - known.at < scan_every:
                continue
            if not waiting(d):
                self._links.pop(pid, None)
                continue
            around = family(pid, d.get("ppid"), gpu_pids)
            own = self._view.fds(pid, now, own=True)
            shape = (around, own) if own is not None else None
            if known is not None and shape is not None and known.shape == shape \
                    and now - known.scanned_at < FEEDERS_QUIET_EVERY_S:
                self._links[pid] = dataclasses.replace(known, at=now)  # nothing it could be linked by changed
                continue
            self._links[pid] = _Links(now, *links(pid, around, own, gpu_pids, self._view, now), shape=shape,
                                      scanned_at=now)
        out: list[FeederSample] = []
        every: dict[int, float] = {}  # a feeder of a busy and a quiet GPU process is read at the busy pace
        for pid, found in self._links.items():
            cadence = FEEDER_READ_EVERY_S if self._fed(pid, now) else FEEDER_QUIET_READ_EVERY_S
            for feeder_pid in found.relations:
                every[feeder_pid] = min(every.get(feeder_pid, cadence), cadence)
        read: dict[int, FeederSample | None] = {}  # a feeder of two GPU processes is read once a tick
        for pid, found in self._links.items():
            for feeder_pid, relation in found.relations.items():
                if feeder_pid not in read:
                    read[feeder_pid] = self._read(feeder_pid, pid, relation, now, every[feeder_pid])
                sample = read[feeder_pid]
                if sample is not None:
                    out.append(self._as_feeding(sample, pid, relation))
        wanted = set(read)
        for gone in set(self._feeders) - wanted:
            del self._feeders[gone]
            forget(gone)  # its held /proc files
        self._view.prune(now, set(self._links))
        self._shaped = {k: v for k, v in self._shaped.items() if k[0] in wanted}
        return out, {pid: found.upstream for pid, found in self._links.items()}

    def _fed(self, pid: int, now: float) -> bool:
        """Whether GPU process ``pid`` waited on something a feeder can supply in the last
        FEEDER_QUIET_READ_EVERY_S (one instant's wait flickers between running and waiting)."""
        return now - self._fed_at.get(pid, float("-inf")) < FEEDER_QUIET_READ_EVERY_S

    def _as_feeding(self, sample: FeederSample, feeds: int, relation: Relation) -> FeederSample:
        """``sample`` as the feeder of ``feeds``: made once per reading (a reading is held for several ticks,
        and copying a dataclass every tick for every feeder was a tenth of the source's cost)."""
        known = self._shaped.get((sample.pid, feeds))
        if known is not None and known[0] is sample and known[1].relation == relation:
            return known[1]
        shaped = dataclasses.replace(sample, feeds=feeds, relation=relation)
        self._shaped[(sample.pid, feeds)] = (sample, shaped)
        return shaped

    def _read(self, pid: int, feeds: int, relation: Relation, now: float,
              every_s: float = FEEDER_READ_EVERY_S) -> FeederSample | None:
        """The feeder's reading: the held one while it is under ``every_s`` old (and has rates), else a new one."""
        known = self._feeders.get(pid)
        if known is not None and known.held is not None and known.held.cpu_percent is not None \
                and now - known.last_time < every_s:
            return known.held
        stat = read_process_stat(pid)
        if stat is None:
            self._feeders.pop(pid, None)
            forget(pid)
            return None
        cpu_total, n_threads = stat.cpu_seconds, stat.threads
        f = self._feeders.get(pid)
        if f is None:
            f = self._feeders[pid] = _Feeder(pid, netfds.read_comm(pid), netfds.read_cmdline(pid), ThreadTracker(pid))
            f.threads.baseline(now, cpu_total)
        io = read_process_io(pid)
        dt = now - f.last_time
        cpu = io_rates = None
        if f.last_cpu is not None and dt > 0:
            cpu = round(100.0 * (cpu_total - f.last_cpu) / dt, 1)
            if io is not None and f.last_io is not None:
                io_rates = [max(0.0, (new - old) / dt) for new, old in zip(io[:2], f.last_io[:2], strict=True)]
        threads = f.threads.update(now, cpu_total, cpu) if f.last_cpu is not None else {}
        f.last_time, f.last_cpu, f.last_io = now, cpu_total, io
        f.held = FeederSample(
            pid=pid, feeds=feeds, relation=relation, name=f.name, cmdline=f.cmdline, cpu_percent=cpu,
            top_thread_cpu_percent=threads.get("top_thread_cpu_percent"), num_threads=n_threads,
            thread_waits=tuple(threads.get("thread_waits", ())), run_wait_percent=threads.get("run_wait_percent"),
            threads_in_io_wait=threads.get("threads_in_io_wait"),
            io_read_bytes_s=io_rates[0] if io_rates else None, io_write_bytes_s=io_rates[1] if io_rates else None)
        return f.held
