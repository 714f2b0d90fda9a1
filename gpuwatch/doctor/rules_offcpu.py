"""The wait off the CPU: the GPU process mostly asleep (not computing) while it moves data, sits in storage
I/O, awaits a service it called or a peer that does not take what it sends; the title says what holds it, as
far as the evidence tells.

Two waits hide behind frames that do not say so. A thread that touches pages of a memory-mapped file that are
not resident takes major page faults: the kernel reads each page from storage while the thread sits in D state,
and its stacks show the code that touched the page (a numpy copy), not a read. And a thread blocked in ``send``
(or a write to a pipe) waits for the other end to drain its buffer: a peer, never demand.

Split from ``rules_feed.py`` (what the GPU waits on), whose cuts it shares (``IO_RATE``, ``IO_WAIT_SHARE``).
"""

from __future__ import annotations

import dataclasses

from gpuwatch.doctor.attribution import time_split
from gpuwatch.doctor.evidence import finding, gpu_evidence, pct, rate
from gpuwatch.doctor.mechanisms import words
from gpuwatch.doctor.process_window import ProcessWindow
from gpuwatch.doctor.rules_evidence import STACK_MAJORITY, WORKERS_CPU, stacks_say
from gpuwatch.doctor.rules_feed import BUSY_UTIL, IO_RATE, IO_WAIT_SHARE, WAITING_CPU, WAITING_PROCESS_CPU
from gpuwatch.doctor.scores import OFF_CPU, OFF_CPU_HOST
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.finding import Finding

#: Percent of a core from which a process asleep on storage is working (not a forgotten idle process): the
#: attribution's ``BUSY_THREAD_CPU`` is 10 %; a reader waiting on NFS uses a few percent.
WORKING_CPU = 2.0
HOST_IOWAIT = 10.0
#: Share of the bytes read that came from storage (``read_bytes`` against ``rchar``) from which the reads are
#: said to be "from storage" (the rest is sockets, pipes or the page cache).
FROM_STORAGE = 0.9
#: Share of samples with no thread running from which a process with a storage wait channel is off the CPU
#: (the same as ``attribution.MAIN_WAITING_SHARE``'s idea: asleep in most samples, with margin).
ASLEEP_SHARE = 0.7
#: Share of the feeding thread's time off a core spent in D state (uninterruptible: storage) from which it
#: waits on storage whatever frames it shows (a majority, as ``rules_evidence.STACK_MAJORITY``).
STORAGE_OF_WAITS = 0.5
#: Kernel wait channels that mean storage (``/proc/PID/wchan``). Sockets, pipes, poll and futex waits
#: without data moving are a server waiting for work (``demand_bound``), not storage.
WAIT_WORDS = ("folio", "page", "io_schedule", "blk", "nfs", "fuse", "ext4", "xfs", "btrfs", "jbd2")
#: Major page faults per second from which a process reads a working set by touching it: a program pages in its
#: own code a few times at start, while a mapped file read on touch takes a fault per page (or readahead window)
#: it reaches, every second.
MAJOR_FAULTS_S = 10.0
#: Device paths of terminals: a thread blocked writing to one waits for the terminal to take its output.
TERMINALS = ("/dev/pts/", "/dev/tty", "/dev/console")
#: Wait classes (``model.thread_wait``) that no I/O explains: a thread waiting for a child to exit, stopped, on
#: a file lock or in the GPU driver waits on that, whatever a few samples in D state or the host's iowait say.
NOT_IO_WAITS = ("child", "stopped", "file_lock", "gpu")


def _off_core(split: dict[str, float]) -> float:
    """Percent of the feeding thread's time neither on a core nor waiting for one (``time_split``)."""
    return 100.0 - split.get("cpu", 0.0) - split.get("runnable", 0.0)


def storage_share(p: ProcessWindow) -> float | None:
    """Percent of the feeding thread's time in storage waits (D state), when that is most of its time off a core
    and a real share of all of it (as ``IO_WAIT_SHARE``); else None. Whatever its frames say, such a thread
    waits on storage."""
    split = time_split(p)
    off_core = _off_core(split)
    io = split.get("io", 0.0)
    return io if io >= max(100 * IO_WAIT_SHARE, STORAGE_OF_WAITS * off_core) else None


def waits_on_other_than_io(p: ProcessWindow) -> str | None:
    """The wait class that holds most of the feeding thread's time off a core when it is one no I/O explains
    (:data:`NOT_IO_WAITS`), else None: such a thread's finding is that wait's, not storage's."""
    split = time_split(p)
    off_core = _off_core(split)
    held = max(NOT_IO_WAITS, key=lambda w: split.get(w, 0.0))
    return held if off_core > 0 and split.get(held, 0.0) >= STACK_MAJORITY * off_core else None


def page_faults(p: ProcessWindow) -> str | None:
    """How the process's counters show it reading storage by touching pages of a mapped file (major page faults;
    where those were not recorded, bytes read from storage that no read call asked for); None when they do not."""
    if p.major_faults_s is not None:
        if p.major_faults_s < MAJOR_FAULTS_S:
            return None
        return f"{p.major_faults_s:.0f} major page faults/s (pages read from storage when touched)"
    disk, calls = p.io_read_bytes_s or 0.0, p.io_read_chars_s or 0.0
    if disk >= IO_RATE and calls < (1.0 - FROM_STORAGE) * disk:
        return (f"reads {rate(disk)} from storage but {rate(calls)} through read calls: the pages of a mapped file "
                "read when touched (page faults)")
    return None


def _paging_line(p: ProcessWindow, io: float, faults: str) -> str:
    mech = p.stacks.mechanism if p.stacks is not None else None
    shown = f" while its stacks show {words(mech)}" if mech not in (None, "storage") else ""
    return f"its feeding thread waits on storage (D state) {io:.0f}% of its time{shown}: {faults}"


def writes_to_terminal(p: ProcessWindow) -> bool:
    """Its main thread's blocked writes go to a terminal (print or logging to a console that does not keep up)."""
    return p.write_target is not None and p.write_target.startswith(TERMINALS)


def peer_writes(p: ProcessWindow) -> str | None:
    """The feeding thread blocked on the sending side of a socket or a pipe in most of its stack samples (a
    file write would put it in D state, not asleep on a socket or pipe): the other end does not take the data
    as fast as it comes, so the thread waits on that peer. The line that says so, naming the peer where found."""
    ev = p.stacks
    if ev is not None and ev.sends < STACK_MAJORITY:
        return None
    split = time_split(p)
    peer = next((f.label for f in p.feeders if f.relation == "peer"), None) or (
        f"a terminal, {p.write_target}" if writes_to_terminal(p) else "not found among this host's processes")
    if ev is None:  # without stacks, the kernel's wait channel tells a blocked sender (a pipe's, a unix socket's)
        if split.get("output", 0.0) < 100 * STACK_MAJORITY:
            return None
        into = "a terminal" if writes_to_terminal(p) else "a full pipe or socket"
        return (f"its feeding thread is blocked sending into {into} {split['output']:.0f}% of its "
                f"time: the other end ({peer}) does not take the data as fast as it is sent")
    if ev.share("network") < STACK_MAJORITY and split.get("input", 0.0) + split.get("output", 0.0) \
            <= split.get("io", 0.0):
        return None  # writes to a file: storage
    return (f"its feeding thread blocks sending on a socket or pipe in {100 * ev.sends:.0f}% of its stack samples: "
            f"the other end ({peer}) does not take the data as fast as it is sent")


def _waiting(p: ProcessWindow, busy: float) -> list[str]:
    """What shows that a process waits off the CPU: I/O, threads in D state, a wait channel."""
    signs = []
    moved = max(p.io_read_bytes_s or 0.0, p.io_read_chars_s or 0.0) + (p.io_write_bytes_s or 0.0)
    if moved >= IO_RATE:
        disk, written = p.io_read_bytes_s or 0.0, p.io_write_bytes_s or 0.0
        total = max(disk, p.io_read_chars_s or 0.0)
        where = "from storage" if disk >= FROM_STORAGE * total else \
            f"({rate(disk)} of it from storage)" if disk >= IO_RATE else "(sockets, pipes or cached files)"
        signs.append(f"reads {rate(total)} {where}" + (f", writes {rate(written)}" if written >= IO_RATE else ""))
    if (p.io_wait_share or 0.0) >= IO_WAIT_SHARE:
        signs.append(f"threads in D state (uninterruptible I/O) in {100 * (p.io_wait_share or 0):.0f}% of samples")
    channel = p.wait_channel or ""
    working = busy >= 1.0 or (p.cpu or 0.0) >= WORKING_CPU or (p.sm_util_mean or 0.0) >= 1.0  # not simply idle
    if not signs and working and (p.sleeping_share or 0.0) >= ASLEEP_SHARE and any(w in channel for w in WAIT_WORDS):
        signs.append(f"asleep in {channel} in most samples, while the GPU has work {busy:.0f}% of the time")
    return signs


def _what_holds(p: ProcessWindow, paging: bool = False, peer: bool = False) -> str:
    """What the process waits on, as far as its evidence says: a peer it sends to, or page faults, when those
    premises hold; else its stacks' waiting mechanism; else storage when its reads come from storage or its
    threads sit in D state; else what moves bytes without storage."""
    if peer:
        return "a terminal that does not keep up with its output" if writes_to_terminal(p) else \
            "a peer that does not take what it sends"
    if paging:
        return "storage (page faults on a memory-mapped file)"
    mech = p.stacks.mechanism if p.stacks is not None else None
    if mech in ("storage", "network", "lock") and stacks_say(p, mech):
        return {"storage": "storage", "network": "the network", "lock": "a lock or a queue"}[mech]
    disk, read = p.io_read_bytes_s or 0.0, max(p.io_read_bytes_s or 0.0, p.io_read_chars_s or 0.0)
    if (p.io_wait_share or 0.0) >= IO_WAIT_SHARE or (p.io_write_bytes_s or 0.0) >= IO_RATE \
            or (read >= IO_RATE and disk >= FROM_STORAGE * read):
        return "storage"
    if read >= IO_RATE:
        return "reads from sockets or pipes"
    return "storage, network or a lock"


def off_cpu_wait(g: GpuWindow) -> Finding | None:
    """GPU underused, its process mostly asleep (not computing), and busy with I/O while it sleeps."""
    busy = g.busy
    if busy is None or busy >= BUSY_UTIL:
        return None
    host_wait = g.host_iowait is not None and g.host_iowait >= HOST_IOWAIT
    for p in sorted(g.processes, key=lambda q: -(q.io_read_chars_s or q.io_read_bytes_s or 0.0)):
        # the kernel has its feeding thread in D state for most of its time off a core, and a real share of all
        # its time: it waits on storage (page faults on a mapped file: the frames of the code that touched the
        # page, the wait in storage), whatever its frames say and whatever CPU its other threads use (they are
        # not what the GPU waits on: the feeding thread is)
        io = storage_share(p)
        if (p.top_thread_cpu or 0.0) >= WAITING_CPU or ((p.cpu or 0.0) >= WAITING_PROCESS_CPU and io is None):
            continue
        if p.workers and (p.workers_cpu or 0.0) >= WORKERS_CPU:
            continue  # the loader workers are what it waits for
        # its stacks say it waits for the GPU or a child process, or computes: not storage, unless in D state
        if io is None and stacks_say(p, "gpu_wait", "collective", "host_op", "python", "compile", "subprocess"):
            continue
        if io is None and waits_on_other_than_io(p) is not None:
            continue  # the kernel says where it waits (a child, a stop, a file lock), and that is not I/O
        if any(f.bound is not None for f in p.feeders):
            continue  # it waits on its feeders, busy or blocked (``feeder_bound``, ``dataloader_bound``)
        signs = _waiting(p, busy) + ([f"host iowait {g.host_iowait:.1f}%"] if host_wait else [])
        faults = page_faults(p) if io is not None else None
        peer = peer_writes(p)
        if faults is not None and io is not None:
            # the paging line says how much it reads, and how
            signs = [_paging_line(p, io, faults), *(s for s in signs if not s.startswith("reads "))]
        if peer is not None:
            signs.append(peer)  # a thread blocked sending is never a server awaiting requests
        elif stacks_say(p, "network") and p.stacks is not None:
            # a client awaiting a remote service (a connection accepted from outside would be demand, unless its
            # stacks await the reply of a service it called)
            if p.stacks.calls >= STACK_MAJORITY:
                signs.append(f"its feeding thread awaits the reply of a service it called (an HTTP or gRPC client) "
                             f"in {100 * p.stacks.calls:.0f}% of its stack samples")
            elif p.upstream != "external":
                signs.append(f"its feeding thread waits in network calls in {100 * p.stacks.share('network'):.0f}% "
                             "of its stack samples, with no connection accepted from outside")
        if not signs:
            continue
        asleep = None if p.sleeping_share is None else \
            f"{p.label}: no thread running in {100 * p.sleeping_share:.0f}% of samples, CPU {p.cpu or 0:.0f}%"
        where = f"main thread waits in {p.wait_channel}" if p.wait_channel else None
        fix = (_TERMINAL_FIX if writes_to_terminal(p) else _PEER_FIX) if peer is not None else \
            _PAGING_FIX if faults is not None else _FIX
        found = finding(
            "off_cpu_wait", f"Waiting off the CPU: {_what_holds(p, faults is not None, peer is not None)} holds the "
            "GPU back", "warning", OFF_CPU(100.0 - busy), g, gpu_evidence(g, asleep, *signs, where), fix, pid=p.pid)
        # the mechanism is storage whatever the frames of the code that touched the pages say; a write the
        # kernel holds on a pipe or socket is a peer's back-pressure, whatever file call its frames show
        if faults is not None:
            return dataclasses.replace(found, mechanism="storage")
        if peer is not None and not stacks_say(p, "network"):
            return dataclasses.replace(found, mechanism="peer_send")
        return found
    if host_wait and not g.processes:
        return finding("off_cpu_wait", "Waiting off the CPU: the host waits on storage", "warning",
                       OFF_CPU_HOST(100.0 - busy), g, gpu_evidence(g, pct("host iowait", g.host_iowait)),
                       "Find the process waiting on storage (iotop, pidstat -d) and cache or prefetch its reads.")
    return None


_FIX = ("Take the wait out of the request path: read ahead asynchronously (a prefetch thread or DataLoader workers), "
        "cache inputs and models in memory or on local SSD at start, batch small reads into large ones, and never "
        "block the GPU loop on network storage or a remote call.")
_PAGING_FIX = ("The thread waits for pages of a memory-mapped file to be read from storage each time it touches "
               "them: read the file into memory once (np.load without mmap_mode, or a copy at start), keep it "
               "resident (enough free memory for the page cache, vmtouch/mlock), tell the kernel how it is read "
               "(madvise MADV_WILLNEED or MADV_SEQUENTIAL), read contiguous blocks rather than strided columns, and "
               "keep the file on fast local storage.")
_PEER_FIX = ("The thread blocks until the process at the other end of its socket or pipe takes what it sends: "
             "take the write out of the GPU loop (a background thread with a bounded queue that drops or batches "
             "when full, logging.handlers.QueueHandler for logs), send less or in batches, or make the peer read "
             "faster; never block the GPU loop on a peer.")
_TERMINAL_FIX = ("The thread blocks until the terminal it writes to has drawn its output (print or logging to a "
                 "console, over ssh, in tmux or a notebook): log to a file or through logging.handlers.QueueHandler, "
                 "print less often (a progress line, not a line per step), or run it with its output redirected; "
                 "never block the GPU loop on a terminal.")
