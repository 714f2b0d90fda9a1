"""Rules for a GPU that waits on its feeder: the CPU thread, launches, copies, loader workers, or I/O.

Each names one cause, and their conditions exclude each other where one signal could mean two things:
a thread at 100 % of a core is a copy from pageable memory when PCIe is busy, a launch loop when
GPU-Util runs far ahead of SM activity, and Python work (tokenising, decoding) otherwise; a thread that
wants a core and gets none is the host's fault (``rules_threads.host_cpu_contention``), not the program's.
Thresholds were chosen on half of the H200 fault variants and checked on the other half (docs/doctor-accuracy-h200.md).
"""

from __future__ import annotations

from gpuwatch.doctor.attribution import (
    PEGGED_THREAD,
    attribution_line,
    feeders_starved,
    host_line,
    host_saturated,
    spare_cores,
    starved,
    time_split,
)
from gpuwatch.doctor.evidence import finding, gpu_evidence, pct, rate, thread_line
from gpuwatch.doctor.mechanisms import advice, words
from gpuwatch.doctor.rules_evidence import (
    STACK_MAJORITY,
    WORKERS_CPU,
    loader_workers_bound,
    mostly_waiting,
    stacks_say,
    waits_on_producer,
)
from gpuwatch.doctor.scores import COPY, COPY_CAP, DATALOADER, INPUT, LAUNCH, OFF_CPU, OFF_CPU_HOST
from gpuwatch.doctor.window import GpuWindow, ProcessWindow
from gpuwatch.model.finding import Finding

BUSY_UTIL = 60.0  # GPU-Util under which the GPU spends much of its time waiting for work
#: GPU-Util under which an input-bound GPU is critical: it does nothing four fifths of the time. The
#: bundled H200 recording's CPU-bound loop wanders between 23 and 46 % (window medians 24-30 %); a cut inside
#: that band flipped one steady incident between critical and warning with the window's length, so the cut
#: sits below it (live, ``steady.Steady`` also holds a shown severity until the score moves 2 points).
CRITICAL_BUSY = 20.0
LAUNCH_RATIO = 0.25  # SM activity / GPU-Util under which "busy" means tiny kernels (H200: 0.0-0.03)
LAUNCH_MIN_UTIL = 10.0
#: Bytes/s in either direction from which copies, not compute, fill the GPU's time while its SMs idle. H200
#: fit variants: copy-bound 1.4-12 GB/s (a pageable .cpu() of fresh 256 MiB tensors is the slowest: page
#: faults), every other class at most 0.2 GB/s; this sits between them on a log scale.
PCIE_HIGH = 0.5e9
PINNED_RATE = 20e9  # bytes/s: a rate no CPU-staged (pageable) copy reaches on PCIe Gen5
HEALTHY_SM = 80.0
WAITING_CPU = 50.0  # a process under half a core is not what the GPU waits for
WAITING_PROCESS_CPU = 2 * WAITING_CPU  # all its threads together: a whole core is computing, not waiting
#: Percent of a core from which a process asleep on storage is working (not a forgotten idle process): the
#: attribution's ``BUSY_THREAD_CPU`` is 10 %; a reader waiting on NFS uses a few percent.
WORKING_CPU = 2.0
IO_RATE = 5e6  # bytes/s read or written: a process that moves data while it waits
IO_WAIT_SHARE = 0.2
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


def pegged_processes(g: GpuWindow) -> list[ProcessWindow]:
    return sorted((p for p in g.processes if (p.top_thread_cpu or 0.0) >= PEGGED_THREAD),
                  key=lambda p: -(p.top_thread_cpu or 0.0))


#: What a thread that computes on the CPU shows in its stacks; one that stages copies shows copy frames
#: (the GPU wait of a pageable cudaMemcpy, the launch path) instead.
COMPUTING = ("host_op", "python", "serialization", "compile")
#: Share of those samples outside plain Python (a host op, serialising, compiling) from which the computing is
#: not the Python around a copy (host_op_matmul, fit: 74 % host op; a staging copy's frames are the launch path).
COMPUTING_NATIVE = 0.25


def copy_direction(g: GpuWindow) -> str | None:
    """"h2d" or "d2h" when PCIe carries a lot one way while the SMs are not busy; else None. Not when the busy
    thread's stacks say it computes on the CPU: the PCIe traffic is then a side effect, not its work."""
    rx, tx = g.pcie_rx_bytes_s or 0.0, g.pcie_tx_bytes_s or 0.0
    if max(rx, tx) < PCIE_HIGH or (g.sm_active is not None and g.sm_active >= HEALTHY_SM):
        return None
    pegged = pegged_processes(g)
    if pegged and pegged[0].stacks is not None and stacks_say(pegged[0], *COMPUTING) \
            and stacks_say(pegged[0], "host_op", "serialization", "compile", share=COMPUTING_NATIVE):
        return None
    if pegged and stacks_say(pegged[0], "allocator"):
        return None  # its time goes to allocating or page-locking memory, not to staging copies
    return "h2d" if rx >= tx else "d2h"


def is_copy_bound(g: GpuWindow) -> bool:
    return copy_direction(g) is not None


#: What a launching thread's stacks show: the launch path and the Python around it (a thread in the allocator's
#: cudaMalloc/cudaFree is not launching: ``memory_churn``).
LAUNCHING = ("launch", "python", None)


def launching(g: GpuWindow) -> list[ProcessWindow]:
    """Pegged processes whose stacks (where sampled) show the launch path: a thread in synchronize is not
    launching however busy it spins, nor is one in a CPU op."""
    return [p for p in pegged_processes(g) if p.stacks is None or stacks_say(p, *LAUNCHING)]


def is_launch_bound(g: GpuWindow) -> bool:
    return (g.util is not None and g.sm_active is not None and g.util >= LAUNCH_MIN_UTIL
            and g.sm_active < LAUNCH_RATIO * g.util and bool(launching(g)) and not is_copy_bound(g))


_COPY_TEXT = {
    "h2d": ("h2d_copies", "Host-to-device copies dominate: the GPU waits for data over PCIe", "PCIe RX",
            "host to device"),
    "d2h": ("d2h_copies", "Device-to-host copies dominate: the GPU waits while results come back over PCIe",
            "PCIe TX", "device to host"),
}


_D2H_FIX = ("copy results back once per batch into a pinned buffer (torch.empty(..., pin_memory=True) and "
            "out.copy_(y, non_blocking=True)) on a side stream; keep reductions and post-processing on the GPU "
            "and bring back only what the caller needs (argmax ids, not logits)")
_H2D_FIX = ("allocate host batches in pinned memory (pin_memory=True, or tensor.pin_memory()) and copy with "
            "non_blocking=True on a side stream so copies overlap compute; keep weights and reused tensors on "
            "the GPU (copy once); send compact inputs (token ids, uint8 images) and expand them on the GPU")


def pcie_copies(g: GpuWindow) -> Finding | None:
    """Copies in either direction: pageable (staged by a CPU thread at a few GB/s) or pinned but not
    overlapped with compute."""
    direction = copy_direction(g)
    if direction is None:
        return None
    code, title, counter, way = _COPY_TEXT[direction]
    moved = max(g.pcie_rx_bytes_s or 0.0, g.pcie_tx_bytes_s or 0.0)
    pegged = pegged_processes(g)
    pageable = bool(pegged) and moved < PINNED_RATE
    pinned = f"{rate(moved)} is a pinned-memory rate: the copies are not staged, but the GPU waits for them"
    staged = attribution_line(pegged[0]) + ": pageable memory, each copy staged by this thread" if pageable else None
    how = staged or (pinned if moved >= PINNED_RATE else None)
    back = _D2H_FIX if direction == "d2h" else _H2D_FIX
    fix = ("Copy less and overlap it: " + back + "." if pageable or moved < PINNED_RATE else
           "The copies are already pinned: overlap them with compute (a side stream and non_blocking=True, "
           "double-buffered batches) and move fewer bytes: " + back.split("; ", 1)[-1] + ".")
    return finding(
        code, title, "warning", COPY.base + min(COPY_CAP, COPY.per_point * moved / 1e9), g,
        gpu_evidence(g, f"{counter} {rate(moved)} ({way}) while SMs are {g.sm_active or 0:.0f}% active", how),
        fix, pid=pegged[0].pid if pegged else None)


def launch_bound(g: GpuWindow) -> Finding | None:
    if not is_launch_bound(g):
        return None
    p = launching(g)[0]
    return finding(
        "launch_bound", "Launch-bound: tiny kernels, one CPU thread launching them as fast as it can", "warning",
        LAUNCH(100.0 - (g.sm_active or 0.0)), g,
        gpu_evidence(g, f"GPU-Util {g.util:.0f}% but SM activity {g.sm_active:.1f}%: kernels too small to "
                     "fill the GPU, it is busy only launching", thread_line(p)),
        "Cut the number of launches: capture the step in CUDA graphs (torch.cuda.graphs, or "
        "torch.compile(mode='reduce-overhead')), fuse elementwise ops (torch.compile), and batch more work "
        "into each kernel (larger batches, no per-item loops over tensors).", pid=p.pid)


def input_cpu_bound(g: GpuWindow) -> Finding | None:
    busy = g.busy
    # a thread whose stacks say it waits (for the GPU, a lock, storage) is not what computes
    # nor one in the CUDA allocator (``memory_churn``)
    pegged = [p for p in pegged_processes(g) if not starved(p) and not mostly_waiting(p)
              and not stacks_say(p, "allocator")]
    # a feeding thread that compiles in the request path is busy on it even while it waits on its compile
    # workers (inductor's subprocesses) part of the time: not pegged, but at half a core or more, compiling
    pegged += [p for p in g.processes if p not in pegged and stacks_say(p, "compile")
               and (p.top_thread_cpu or 0.0) >= WAITING_CPU and not starved(p)]
    # the GPU thread awaits what another thread of its process makes (a future, a queue), and that producer is
    # pegged on a core: in effect the producer is the thread that feeds the GPU
    pegged += [p for p in g.processes if p not in pegged and waits_on_producer(p)
               and (p.top_thread_cpu or 0.0) >= PEGGED_THREAD and not starved(p)]
    if busy is None or busy >= BUSY_UTIL or not pegged or is_copy_bound(g) or is_launch_bound(g):
        return None
    p = pegged[0]
    top = p.top_thread_cpu or 0.0
    producer = p.stacks.holders if waits_on_producer(p) and p.stacks is not None else None
    mech = (producer or p.stacks).mechanism if p.stacks is not None else None
    doing = f"busy: {words(mech)}" if mech else "busy on the CPU"
    if producer is not None:
        doing += " (a thread of its own that the GPU thread waits on)"
    said = advice(mech)
    # compiling is not preprocessing: moving it into workers does not help, compiling once does
    offload = "" if mech == "compile" else (
        "Move preprocessing (tokenising, decoding, resizing) out of the thread that owns the GPU into worker "
        "processes (DataLoader num_workers, or N processes feeding the GPU loop through a queue); that thread "
        "should only batch, copy and launch. ")
    return finding(
        "input_cpu_bound", f"Input pipeline CPU-bound: the thread that feeds the GPU is {doing}",
        "critical" if busy < CRITICAL_BUSY else "warning", INPUT((100.0 - busy) * min(1.0, top / 100.0)),
        g, gpu_evidence(g, thread_line(p), attribution_line(p), f"the GPU idles {100 - busy:.0f}% of the time"),
        (said[0].upper() + said[1:] + ". " if said else "") + offload +
        f"See where it spends its time: py-spy dump --pid {p.pid} (or gpuwatch doctor --stacks).", pid=p.pid)


def dataloader_bound(g: GpuWindow) -> Finding | None:
    busy = g.busy
    if busy is None or busy >= BUSY_UTIL:
        return None
    # compiler processes are not a data loader: their stacks (or the feeding thread's) say compile
    # nor are the peers of a collective (the feeding thread in gloo/NCCL waits on ranks, not on batches)
    # storage-bound children are feeders (``feeder_bound``), not busy loader workers
    # nor workers starved of a core on a saturated host (``host_cpu_contention``: they oversubscribe it)
    feeding = [p for p in g.processes if loader_workers_bound(p)
               and (p.top_thread_cpu or 0.0) < PEGGED_THREAD and not stacks_say(p, "compile")
               and not stacks_say(p, "collective")
               and not (host_saturated(g) and feeders_starved(p))]
    if not feeding:
        return None
    p = max(feeding, key=lambda q: q.workers_cpu or 0.0)
    spare = spare_cores(g)
    more = ("raise DataLoader num_workers (up to the idle cores)" if spare is None or spare >= 1.0 else
            "no core is idle, so more workers would only queue: make each item cheaper")
    return finding(
        "dataloader_bound", "Data-loader workers are the bottleneck: the GPU waits for batches", "warning",
        DATALOADER(100.0 - busy), g,
        gpu_evidence(g, f"{p.label}: {p.workers} worker processes use {p.workers_cpu or 0:.0f}% of a core "
                     f"together, {p.workers_busy or 0:.0f} of them at 80% or more",
                     f"{p.label} itself: busiest thread at {p.top_thread_cpu or 0:.0f}% (waiting for batches"
                     + (f" in {p.wait_channel})" if p.wait_channel else ")"), host_line(g)),
        f"Give the loader more CPU or make each item cheaper: {more}; use persistent_workers=True and "
        "prefetch_factor, move decoding and augmentation to the GPU (torchvision.io.decode_jpeg on cuda, "
        "NVIDIA DALI), and cache decoded items.", pid=p.pid)


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
