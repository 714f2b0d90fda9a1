"""Rules read off the sampled stacks and the feeders: a few long kernels, feeders that are the bottleneck
(the general finding that needs no class is ``rules_general``).

They also hold the tests by which the other classes yield to evidence (``stacks_say``): a class whose
premise the feeding thread's stacks contradict does not fire. Without stacks these rules either stay
silent (``long_kernels``) or fall back to what ``/proc`` shows (the thread attribution's wait classes).
"""

from __future__ import annotations

from gpuwatch.doctor.attribution import attribution_line, time_split
from gpuwatch.doctor.evidence import finding, gpu_evidence
from gpuwatch.doctor.feeder_window import FeederWindow
from gpuwatch.doctor.mechanisms import is_waiting
from gpuwatch.doctor.process_window import ProcessWindow
from gpuwatch.doctor.scores import FEEDER, LONG_KERNELS
from gpuwatch.doctor.stack_window import LOCK_HOLDERS_SHARE
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.finding import Finding

#: Share of the feeding thread's stack samples in one mechanism from which it is what the thread does
#: (a majority: the other half of the samples cannot then tell a different story).
STACK_MAJORITY = 0.5
#: GPU-Util from which the GPU always has a kernel in flight, and SM activity under which those kernels
#: use few SMs: a few long kernels (a kernel that does not finish, a stuck collective), not launch-bound.
#: (H200: a spin kernel of one block reads 100 % GPU-Util at 1-2 % SM activity; launch-bound loops run
#: 40-80 % GPU-Util; a healthy GEMM 90 %+ SM activity.)
LONG_UTIL = 90.0
LONG_SM = 25.0
#: A process's own SM share (percent, NVML's per-process sampling: noisy over a window) under which the kernels in
#: flight are not its own: an idle neighbour reads ~0, the long-kernel variants' processes 48-93 (the share at
#: which ``rules_gpu.time_slicing`` counts a process as using the GPU).
OWN_KERNELS = 10.0
UNDER_USED = 60.0  # GPU-Util under which the GPU waits for work (``rules_feed.BUSY_UTIL``)
#: A feeding thread that waits for work in this share of its time waits on something (a feeder or demand).
FEEDER_WAITS = 0.5
#: The feeding thread's waits that another process can end (a feeder writing, draining or releasing).
FEEDER_WAITS_ON = ("lock", "file_lock", "input", "output", "child", "sleep", "other")
WORKERS_CPU = 50.0  # loader workers together at half a core or more (``rules_feed.dataloader_bound``)
FEEDERS_NAMED = 3  # the busiest feeders a finding names (the rest: the same story)


def stacks_say(p: ProcessWindow | None, *mechanisms: str | None, share: float = STACK_MAJORITY) -> bool:
    """The feeding thread's stacks put at least ``share`` of its samples in ``mechanisms``."""
    return p is not None and p.stacks is not None and p.stacks.share(*mechanisms) >= share


def hands_off_results(p: ProcessWindow | None) -> bool:
    """The feeding thread mostly waits to put its results on a full queue: what it waits on comes after it (a
    post-processing thread or process that takes them more slowly than the GPU makes them), so the processes
    and threads it waits on are its consumers, never its feeders or its loader, and it is no idle server."""
    return p is not None and p.stacks is not None and p.stacks.puts >= STACK_MAJORITY


#: What a host thread does while a kernel it issued runs and it issues nothing else: it blocks in
#: synchronize, waits in a collective, or sleeps between polls of an event (``while not ev.query(): sleep``).
GPU_PACED = ("gpu_wait", "collective", "sleep")


def waits_on_gpu(g: GpuWindow) -> ProcessWindow | None:
    """The process whose feeding thread mostly waits while the GPU works, rather than launching or computing:
    from its stacks (synchronize, a collective, a sleep between polls), or without stacks from /proc (asleep in
    the GPU driver or on a timer most of the time). Behind a GPU that always has a kernel in flight, such a
    host is not what paces the GPU: the kernels are, if they are its own (an idle process beside another's
    kernels is not waiting for them). The GPU's busiest such process first."""
    def paced(p: ProcessWindow) -> bool:
        if p.sm_util_mean is not None and p.sm_util_mean < OWN_KERNELS:
            return False  # the kernels in flight are mostly another process's: this one may just be idle
        if p.stacks is not None:
            return stacks_say(p, *GPU_PACED)
        split = time_split(p)
        return split.get("gpu", 0.0) + split.get("sleep", 0.0) >= 100 * STACK_MAJORITY
    return max((p for p in g.processes if paced(p)), key=lambda p: p.sm_util_mean or 0.0, default=None)


def _how_host_waits(p: ProcessWindow) -> str:
    """The title's half about the host, as its evidence says it."""
    if p.stacks is None:
        split = time_split(p)
        return "the host sleeps between polls" if split.get("sleep", 0.0) > split.get("gpu", 0.0) else \
            "the host waits for them"
    top = max(GPU_PACED, key=lambda m: p.stacks.share(m) if p.stacks else 0.0)
    return {"gpu_wait": "the host waits on the GPU until they finish", "collective": "the host waits in a collective",
            "sleep": "the host sleeps between polls until they finish"}[top]


def long_kernels(g: GpuWindow) -> Finding | None:
    """The GPU always busy, its SMs mostly empty, the host waiting for it (not launching, not computing): a few
    long kernels set the pace. Launch-bound work and small kernels fed one request at a time keep the host
    thread busy instead."""
    if g.util is None or g.sm_active is None or g.util < LONG_UTIL or g.sm_active >= LONG_SM:
        return None
    p = waits_on_gpu(g)
    if p is None:
        return None
    coll = p.stacks is not None and p.stacks.share("collective") > p.stacks.share("gpu_wait")
    how = p.stacks.line(f"{p.label}, feeding thread") if p.stacks else attribution_line(p)
    return finding(
        "long_kernels", "A few long kernels: the GPU is always busy but its SMs are mostly empty, "
        + _how_host_waits(p), "warning", LONG_KERNELS(100.0 - g.sm_active), g,
        gpu_evidence(g, f"GPU-Util {g.util:.0f}% with SM activity {g.sm_active:.1f}%: a kernel is always in "
                     "flight, on few SMs", how),
        ("A collective waits for a peer that does not arrive: find the straggling or stuck rank (NCCL_DEBUG=INFO, "
         "py-spy dump on every rank) and set a timeout on the process group." if coll else
         "A kernel runs long on few SMs (a spin or wait loop on the GPU, a tiny grid, a kernel that does not "
         "finish): profile it (nsys profile, ncu) and give it more blocks, or find the loop that waits on the "
         "device; it is not launch overhead."), pid=p.pid)


def _fed_waiting(g: GpuWindow) -> list[tuple[ProcessWindow, list[str]]]:
    """GPU processes that wait for work while one of their feeders is busy or blocked (feeder lines)."""
    out = []
    for p in g.processes:
        bound = [f for f in p.feeders if f.bound is not None]
        # (a thread that waits on the children it spawns makes them bound on ``subprocess``: ``waited_on``)
        if not bound or _loader(p, bound) or hands_off_results(p):
            continue  # (a thread handing results to a full queue waits on its consumers: ``idle_breakdown``)
        if p.stacks is not None:
            # a pipe read shows as a file read (storage): the thread waits on what writes into the pipe
            waiting = p.stacks.share("lock", "network", "subprocess", "sleep", "storage", None) >= FEEDER_WAITS
        else:
            split = time_split(p)
            waiting = sum(split.get(w, 0.0) for w in FEEDER_WAITS_ON) >= 100 * FEEDER_WAITS
        if waiting:
            out.append((p, [f.line() for f in bound[:FEEDERS_NAMED]]))
    return out


def _loader(p: ProcessWindow, bound: list[FeederWindow]) -> bool:
    """Busy data-loader workers bound on their CPU: ``dataloader_bound``'s premise, which keeps its code. Not a
    process whose feeding thread mostly waits for a child to exit (waitpid): it spawns a process per item and
    waits for it, which a loader's pool never does."""
    if time_split(p).get("child", 0.0) >= 100 * FEEDER_WAITS:
        return False
    return bool(p.workers) and (p.workers_cpu or 0.0) >= WORKERS_CPU and all(f.bound in ("cpu", "gil") for f in bound)


def loader_workers_bound(p: ProcessWindow) -> bool:
    """The process's worker children are CPU-bound loader workers, as far as its feeders show: none of them
    bound on storage, the network, a compiler or anything but their CPU (without feeder samples, the workers'
    CPU alone decides)."""
    bound = [f for f in p.feeders if f.bound is not None]
    return _loader(p, bound)


def feeder_bound(g: GpuWindow) -> Finding | None:
    """The GPU process waits on a pipe, a queue or a socket, and what feeds it is busy or blocked."""
    if g.busy is None or g.busy >= UNDER_USED:
        return None
    fed = _fed_waiting(g)
    if not fed:
        return None
    p, lines = fed[0]
    bound = next((f.bound for f in p.feeders if f.bound is not None), None) or "cpu"
    busy = g.busy
    return finding(
        "feeder_bound", f"The processes that feed the GPU process are the bottleneck (bound on {bound})", "warning",
        FEEDER(100.0 - busy), g,
        gpu_evidence(g, f"{p.label} waits for its feeders while the GPU idles {100 - busy:.0f}% of the time",
                     *lines, p.stacks.line(f"{p.label}, feeding thread") if p.stacks else attribution_line(p)),
        f"Speed up the feeders, not the GPU process: {_FEEDER_FIX.get(bound, _FEEDER_FIX['cpu'])}", pid=p.pid)


_FEEDER_FIX = {
    "cpu": "run more of them (up to the idle cores) or make each item cheaper; check that they are not pinned "
           "to one core",
    "gil": "their threads take turns on the GIL: use processes instead of threads in the feeders",
    "storage": "they wait on storage: cache inputs on local SSD or in memory, read ahead, and batch small reads",
    "compile": "they compile (torch.compile, triton, nvcc): compile once at start-up and cache the kernels",
    "network": "they wait on the network: prefetch and batch remote reads, keep connections open",
    "host_op": "they run torch/numpy ops on the CPU: batch them, or move them onto the GPU",
    "serialization": "they (de)serialise every item: use shared memory or a binary format",
    "subprocess": "they spawn processes per item: keep a pool",
}


def feeding_process(g: GpuWindow) -> ProcessWindow | None:
    """The process that feeds the GPU: of those holding it, the one whose stacks were sampled, then the busiest."""
    holders = [p for p in g.processes if (p.gpu_memory_bytes or 0.0) > 0 or (p.sm_util_mean or 0.0) > 0]
    return max(holders, key=lambda q: (q.stacks is not None, q.top_thread_cpu or 0.0, q.sm_util_mean or 0.0),
               default=None)


def not_the_gil(p: ProcessWindow) -> bool:
    """The stacks contradict Python threads taking turns on the GIL: the feeding thread's time goes mostly
    to something other than Python or a lock (a native op, the GPU, I/O), or it waits on a lock (a
    ``threading`` lock or queue, not the GIL) held by threads whose working time runs native code. Without
    stacks nothing is contradicted. (A thread waiting for the GIL shows Python frames, ``take_gil``, or a
    condition wait entered straight from Python: Python, ``mechanisms.waits_for_gil``.)"""
    ev = p.stacks
    if ev is None:
        return False
    if ev.share("python", "lock", None) < STACK_MAJORITY:
        return True
    held = ev.holders
    if ev.share("lock") < STACK_MAJORITY or held is None:
        return False
    # an idle pool thread waiting for its next item says nothing either way: only where the holders work counts
    return held.share("lock") < 1.0 and held.working_share(*HOLDS_GIL) < STACK_MAJORITY


#: What a thread that computes shows in its stacks (a producer the GPU thread waits on, say).
COMPUTES = ("python", "host_op", "serialization", "compile")


def waits_on_producer(p: ProcessWindow | None) -> bool:
    """The GPU thread mostly awaits a result another thread of its process hands over (a future, a queue, an
    event: not a mutex held over other work), and the threads that run meanwhile compute: the GPU is fed at
    that producer's pace, and the producer's code is what keeps it waiting."""
    ev = p.stacks if p is not None else None
    return ev is not None and ev.share("lock") >= STACK_MAJORITY and ev.awaits >= STACK_MAJORITY \
        and ev.holders is not None and ev.holders.share(*COMPUTES) >= STACK_MAJORITY


#: What a thread holding the GIL shows: Python code, or C code that keeps it (json, pickle); unclassified frames.
HOLDS_GIL = ("python", "serialization", None)


def waits_on_python_threads(p: ProcessWindow | None) -> bool:
    """The GPU thread waits to take the GIL back, or for results other threads of its process hand over, and
    those threads, where they work, hold the GIL: their code is what keeps the GPU waiting."""
    ev = p.stacks if p is not None else None
    return ev is not None and (ev.gil >= LOCK_HOLDERS_SHARE or ev.awaits >= STACK_MAJORITY) \
        and ev.holders is not None and ev.holders.working_share(*HOLDS_GIL) >= STACK_MAJORITY


#: Waits on something other than the GPU: a peer, a lock or a queue, a timer, storage, a child process.
WAITS_ELSEWHERE = ("collective", "network", "lock", "sleep", "storage", "subprocess")


def waits_elsewhere(p: ProcessWindow | None) -> bool:
    """The feeding thread's stacks put most of its samples in a wait on something other than the GPU: the GPU
    waits on what that thread waits on (a collective, a peer, a lock), not on the copies or launches it makes
    in between."""
    return stacks_say(p, *WAITS_ELSEWHERE)


def mostly_waiting(p: ProcessWindow | None) -> bool:
    """The feeding thread's stacks say it waits (GPU, lock, storage, network...), not computes."""
    return p is not None and p.stacks is not None and is_waiting(p.stacks.mechanism) and \
        p.stacks.share(p.stacks.mechanism) >= STACK_MAJORITY
