"""The wait off the CPU: the GPU process mostly asleep (not computing) while it moves data, sits in storage
I/O, or awaits a service it called; the title says what holds it, as far as the evidence tells.

Split from ``rules_feed.py`` (what the GPU waits on), whose cuts it shares (``IO_RATE``, ``IO_WAIT_SHARE``).
"""

from __future__ import annotations

from gpuwatch.doctor.attribution import time_split
from gpuwatch.doctor.evidence import finding, gpu_evidence, pct, rate
from gpuwatch.doctor.rules_evidence import STACK_MAJORITY, WORKERS_CPU, stacks_say
from gpuwatch.doctor.rules_feed import BUSY_UTIL, IO_RATE, IO_WAIT_SHARE, WAITING_CPU, WAITING_PROCESS_CPU
from gpuwatch.doctor.scores import OFF_CPU, OFF_CPU_HOST
from gpuwatch.doctor.window import GpuWindow, ProcessWindow
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


def _what_holds(p: ProcessWindow) -> str:
    """What the process waits on, as far as its evidence says: its stacks' waiting mechanism; else storage when
    its reads come from storage or its threads sit in D state; else what moves bytes without storage."""
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
        if (p.top_thread_cpu or 0.0) >= WAITING_CPU or (p.cpu or 0.0) >= WAITING_PROCESS_CPU:
            continue
        if p.workers and (p.workers_cpu or 0.0) >= WORKERS_CPU:
            continue  # the loader workers are what it waits for
        # its stacks say it waits for the GPU or a child process, or computes: not storage; unless the kernel has
        # its feeding thread (not pegged: under half a core, above) in D state for most of its time off a core,
        # and a real share of all its time (page faults on a mapped file: the frames of the code that touched
        # the page, the wait in storage)
        split = time_split(p)
        off_core = 100.0 - split.get("cpu", 0.0) - split.get("runnable", 0.0)
        faulting = split.get("io", 0.0) >= max(100 * IO_WAIT_SHARE, STORAGE_OF_WAITS * off_core)
        if not faulting and stacks_say(p, "gpu_wait", "collective", "host_op", "python", "compile", "subprocess"):
            continue
        if any(f.bound is not None for f in p.feeders):
            continue  # it waits on its feeders, busy or blocked (``feeder_bound``, ``dataloader_bound``)
        signs = _waiting(p, busy) + ([f"host iowait {g.host_iowait:.1f}%"] if host_wait else [])
        if stacks_say(p, "network") and p.stacks is not None:
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
        return finding(
            "off_cpu_wait", f"Waiting off the CPU: {_what_holds(p)} holds the GPU back", "warning",
            OFF_CPU(100.0 - busy), g, gpu_evidence(g, asleep, *signs, where),
            "Take the wait out of the request path: read ahead asynchronously (a prefetch thread or "
            "DataLoader workers), cache inputs and models in memory or on local SSD at start, batch small reads "
            "into large ones, and never block the GPU loop on network storage or a remote call.", pid=p.pid)
    if host_wait and not g.processes:
        return finding("off_cpu_wait", "Waiting off the CPU: the host waits on storage", "warning",
                       OFF_CPU_HOST(100.0 - busy), g, gpu_evidence(g, pct("host iowait", g.host_iowait)),
                       "Find the process waiting on storage (iotop, pidstat -d) and cache or prefetch its reads.")
    return None
