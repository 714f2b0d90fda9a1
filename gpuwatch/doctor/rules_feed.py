"""Rules for a GPU that waits on its feeder: the CPU thread, launches, copies, loader workers, or I/O.

Each names one cause, and their conditions exclude each other where one signal could mean two things:
a thread at 100 % of a core is a copy from pageable memory when PCIe is busy, a launch loop when
GPU-Util runs far ahead of SM activity, and Python work (tokenising, decoding) otherwise; a thread that
wants a core and gets none is the host's fault (``rules_threads.host_cpu_contention``), not the program's.
Thresholds were chosen on half of the H200 fault variants and checked on the other half (docs/doctor-accuracy-h200.md).
"""

from __future__ import annotations

import dataclasses

from gpuwatch.doctor.attribution import (
    PEGGED_THREAD,
    attribution_line,
    feeders_starved,
    host_line,
    host_saturated,
    spare_cores,
    starved,
)
from gpuwatch.doctor.evidence import finding, gpu_evidence, rate, thread_line
from gpuwatch.doctor.kernel_time import kernel_line, kernel_mechanism
from gpuwatch.doctor.mechanisms import advice, words
from gpuwatch.doctor.process_window import ProcessWindow
from gpuwatch.doctor.rules_evidence import (
    feeding_process,
    hands_off_results,
    loader_workers_bound,
    mostly_waiting,
    stacks_say,
    waits_elsewhere,
    waits_on_producer,
)
from gpuwatch.doctor.scores import COPY, COPY_CAP, DATALOADER, INPUT, LAUNCH
from gpuwatch.doctor.window import GpuWindow
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
IO_RATE = 5e6  # bytes/s read or written: a process that moves data while it waits
IO_WAIT_SHARE = 0.2



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
    thread's stacks say it computes on the CPU: the PCIe traffic is then a side effect, not its work. Nor when
    no thread is pegged staging copies and the feeding thread's stacks say it mostly waits on something else (a
    collective, a peer, a lock): the copies come between those waits, and the GPU waits on what that thread
    waits on."""
    rx, tx = g.pcie_rx_bytes_s or 0.0, g.pcie_tx_bytes_s or 0.0
    if max(rx, tx) < PCIE_HIGH or (g.sm_active is not None and g.sm_active >= HEALTHY_SM):
        return None
    pegged = pegged_processes(g)
    if pegged and pegged[0].stacks is not None and stacks_say(pegged[0], *COMPUTING) \
            and stacks_say(pegged[0], "host_op", "serialization", "compile", share=COMPUTING_NATIVE):
        return None
    if pegged and stacks_say(pegged[0], "allocator"):
        return None  # its time goes to allocating or page-locking memory, not to staging copies
    if not pegged and waits_elsewhere(feeding_process(g)):
        return None
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
    # the process the copies are about: the thread staging them, else the GPU's feeding process (its stacks
    # then say what its thread does between copies)
    about = pegged[0] if pegged else feeding_process(g)
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
        fix, pid=about.pid if about is not None else None)


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
    # the kernel's counters say where its CPU goes when its frames cannot: mapping fresh pages, system calls
    kernel = kernel_mechanism(p) if producer is None else None
    mech = kernel or ((producer or p.stacks).mechanism if p.stacks is not None else None)
    doing = f"busy: {words(mech)}" if mech else "busy on the CPU"
    if producer is not None:
        doing += " (a thread of its own that the GPU thread waits on)"
    said = advice(mech)
    # compiling is not preprocessing: moving it into workers does not help, compiling once does; nor does it
    # help work the kernel does for the thread: asking the kernel less does
    offload = "" if mech in ("compile", "fresh_memory", "syscalls") else (
        "Move preprocessing (tokenising, decoding, resizing) out of the thread that owns the GPU into worker "
        "processes (DataLoader num_workers, or N processes feeding the GPU loop through a queue); that thread "
        "should only batch, copy and launch. ")
    found = finding(
        "input_cpu_bound", f"Input pipeline CPU-bound: the thread that feeds the GPU is {doing}",
        "critical" if busy < CRITICAL_BUSY else "warning", INPUT((100.0 - busy) * min(1.0, top / 100.0)),
        g, gpu_evidence(g, thread_line(p), attribution_line(p), kernel_line(p, kernel) if kernel else None,
                        f"the GPU idles {100 - busy:.0f}% of the time"),
        (said[0].upper() + said[1:] + ". " if said else "") + offload +
        f"See where it spends its time: py-spy dump --pid {p.pid} (or gpuwatch doctor --stacks).", pid=p.pid)
    # the frames show the line that allocates or calls (its location), the kernel says what the time goes to
    return dataclasses.replace(found, mechanism=kernel) if kernel else found


def dataloader_bound(g: GpuWindow) -> Finding | None:
    busy = g.busy
    if busy is None or busy >= BUSY_UTIL:
        return None
    # compiler processes are not a data loader: their stacks (or the feeding thread's) say compile
    # nor are the peers of a collective (the feeding thread in gloo/NCCL waits on ranks, not on batches)
    # nor the consumers of its results (it waits to put them on a full queue: they come after it)
    # storage-bound children are feeders (``feeder_bound``), not busy loader workers
    # nor workers starved of a core on a saturated host or within the process's own CPU limit
    # (``host_cpu_contention``: they oversubscribe it; more workers would only queue)
    feeding = [p for p in g.processes if loader_workers_bound(p)
               and (p.top_thread_cpu or 0.0) < PEGGED_THREAD and not stacks_say(p, "compile")
               and not stacks_say(p, "collective") and not hands_off_results(p)
               and not ((host_saturated(g) or p.cpu_limit is not None) and feeders_starved(p))]
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
