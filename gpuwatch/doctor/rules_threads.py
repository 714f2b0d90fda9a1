"""Rules read off the thread attribution (``attribution.py``): threads that take turns on the GIL, a host
(or a process's own CPU limit) with no core to spare, and a server that simply has no work.

Each needs the per-thread data a live sample carries (CPU per thread, schedstat's run delay, wait
classes); on a recording without it they stay silent and the older rules speak.
"""

from __future__ import annotations

from gpuwatch.doctor.attribution import (
    IDLE_CPU,
    WAITING_EXPLAINS,
    attribution_line,
    feeders_starved,
    gil_bound,
    host_line,
    host_saturated,
    idle_on_input,
    limit_bound,
    limit_line,
    peers_take_the_quota,
    starved,
    threads_line,
    top_cpu,
    waiting_for_work,
)
from gpuwatch.doctor.evidence import finding, gpu_evidence
from gpuwatch.doctor.process_window import ProcessWindow
from gpuwatch.doctor.rules_evidence import (
    STACK_MAJORITY,
    WORKERS_CPU,
    hands_off_results,
    not_the_gil,
    stacks_say,
)
from gpuwatch.doctor.rules_feed import BUSY_UTIL, IO_RATE, IO_WAIT_SHARE
from gpuwatch.doctor.scores import DEMAND, GIL, HOST_CONTENTION
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.finding import Finding
from gpuwatch.model.process_sample import CPU_AFFINITY

HEADROOM_UTIL = 90.0  # under this the GPU could take more work
#: With positive evidence of outside demand (an accepted connection from outside the process tree, no
#: feeder busy), the waiting share that makes a server demand-bound is lowered by this band below
#: ``attribution.WAITING_EXPLAINS``: an idle server whose share wanders around the cut stays demand-bound.
DEMAND_BAND = 0.25
#: Mechanisms a server waiting for work is in (or unclassified idle frames: epoll in C).
WAITING_FOR_WORK = ("input", "network", "lock", "sleep", None)
#: What a server does while it serves a request on the GPU: launches its kernels and waits for its result.
SERVING = ("gpu_wait", "launch", "allocator")
#: A server's stacks show it waiting for work in at least this share of their samples (the rest serving):
#: a server at a third of the GPU spends most of its samples on requests, and is still demand-bound.
DEMAND_WAIT_MIN = 0.25


def under_used(g: GpuWindow) -> bool:
    return g.busy is not None and g.busy < BUSY_UTIL


def host_contended(g: GpuWindow) -> list[ProcessWindow]:
    """GPU processes whose threads wait for a core: on a host with none to spare, or within their own CPU
    limit (a cgroup quota, an affinity) whatever the host has; most starved first."""
    saturated = host_saturated(g)
    return sorted((p for p in g.processes if limit_bound(p, g) or (saturated and (starved(p) or feeders_starved(p)))),
                  key=lambda p: -(p.top_run_wait or 0.0))


def gil_contended(g: GpuWindow) -> list[ProcessWindow]:
    """Processes whose threads take turns on the GIL, as /proc shows it and the stacks do not contradict."""
    return sorted((p for p in g.processes if gil_bound(p) and not not_the_gil(p)),
                  key=lambda p: -(p.threads_cpu or 0.0))


def host_cpu_contention(g: GpuWindow) -> Finding | None:
    contended = host_contended(g)
    if not under_used(g) or not contended:
        return None
    p, busy = contended[0], g.busy or 0.0
    if limit_bound(p, g):
        return _limit_reached(g, p, busy)
    return finding(
        "host_cpu_contention", "Host CPU oversubscribed: the feeding thread waits for a core", "warning",
        HOST_CONTENTION(100.0 - busy), g,
        gpu_evidence(g, attribution_line(p), threads_line(p), host_line(g),
                     f"the GPU idles {100 - busy:.0f}% of the time"),
        "Give the feeding thread a core: run fewer CPU-bound workers and threads than there are cores "
        "(DataLoader num_workers, torch.set_num_threads / OMP_NUM_THREADS, tokenizer and BLAS thread pools), "
        "pin the GPU process to its own cores (taskset, cpuset) or give it a CPU quota above its neighbours, and "
        "move noisy neighbours off this host. Find who takes the cores with top -H or pidstat -u 1.", pid=p.pid)


def _limit_reached(g: GpuWindow, p: ProcessWindow, busy: float) -> Finding:
    """The same wait for a core, set by the process's own limit: the fix is the limit, the thread count, or the
    other processes under the same quota."""
    by = p.cpu_limit_by or "CPU limit"
    cores = f"the host's {g.host_cpu_count} cores" if g.host_cpu_count else "the host's cores"
    if by == CPU_AFFINITY:
        fix = ("Widen the process's CPU affinity (taskset -p, the cpuset it runs in) or run no more busy threads "
               "than the cores it allows: torch.set_num_threads / OMP_NUM_THREADS, DataLoader num_workers and "
               f"tokenizer pools size themselves by {cores}. See its allowed cores with taskset -p {p.pid}.")
    elif peers_take_the_quota(p):
        fix = ("Other processes under the same quota use most of it (named above: a sidecar, a log shipper, an "
               "exporter): move them out of the GPU process's cgroup (a container of their own with its own limit) "
               "or raise the limit to cover them; see the throttling in the cgroup's cpu.stat (nr_throttled).")
    else:
        fix = ("Raise or remove the CPU limit (Kubernetes resources.limits.cpu; a GPU pod's feeding threads need "
               "whole cores: the static CPU manager with requests equal to limits), or run no more busy threads "
               "than it allows: torch.set_num_threads / OMP_NUM_THREADS, DataLoader num_workers and tokenizer pools "
               f"size themselves by {cores}, not by a quota, and together use it up early in each period. See the "
               "throttling in the cgroup's cpu.stat (nr_throttled).")
    return finding(
        "host_cpu_contention", f"CPU limit reached: the feeding thread waits for a core its {by} allows",
        "warning", HOST_CONTENTION(100.0 - busy), g,
        gpu_evidence(g, limit_line(p), attribution_line(p), threads_line(p), host_line(g),
                     f"the GPU idles {100 - busy:.0f}% of the time"),
        fix, pid=p.pid)


def gil_contention(g: GpuWindow) -> Finding | None:
    contended = gil_contended(g)
    if not under_used(g) or not contended or host_contended(g):
        return None
    p, busy = contended[0], g.busy or 0.0
    lock = "" if p.threads_lock_share is None else \
        f"; its working threads sleep on a lock (futex) in {100 * p.threads_lock_share:.0f}% of samples"
    return finding(
        "gil_contention", "Python threads take turns on the GIL: the GPU waits for one core's worth of work",
        "warning", GIL(100.0 - busy), g,
        gpu_evidence(g, (threads_line(p) or p.label) + ", none pegged: the GIL runs one at a time" + lock,
                     attribution_line(p), f"the GPU idles {100 - busy:.0f}% of the time"),
        "Threads of one Python process share one GIL, so N threads of Python work give one core. Move the "
        "preprocessing into processes (DataLoader num_workers, multiprocessing or a process pool feeding a "
        "queue), or into native code that releases the GIL (a tokenizer's batch call, numpy or torch ops), or "
        "onto the GPU; keep the thread that owns the GPU for batching, copies and launches. "
        f"See which threads hold it: py-spy dump --pid {p.pid}.", pid=p.pid)


def _moves_data(p: ProcessWindow) -> bool:
    moved = max(p.io_read_bytes_s or 0.0, p.io_read_chars_s or 0.0) + (p.io_write_bytes_s or 0.0)
    return moved >= IO_RATE or (p.io_wait_share or 0.0) >= IO_WAIT_SHARE


#: Where its work comes from (``ProcessWindow.upstream``) when that says outside demand may reach it: a front
#: door (a listener, a bound UDP socket, an accepted connection from outside the tree), or not read at all (a
#: recording made before the host source followed sockets: judged on its threads alone, as then). ``tree``
#: (only its own processes feed it: a thread of its own that makes up work on a timer, a client it started)
#: and ``unknown`` (its sockets could not be read) are no evidence of demand.
DEMAND_UPSTREAM = ("external", None)


def demand_evidence(p: ProcessWindow) -> bool:
    """Outside demand is what it waits for: its sockets show a front door (or were not read: see
    DEMAND_UPSTREAM), no feeder is busy or blocked, and its stacks (where sampled) show it waiting for work, not
    waiting on the GPU or computing; a thread mostly in network calls counts as waiting for work only where a
    connection from outside was accepted (else it is a client waiting on a remote service, ``off_cpu_wait``).
    Between requests it waits for work; while it serves one it launches kernels and waits for their result.
    The feeding thread may wait on a queue or a pipe that another thread of its own fills from the front door
    (the web thread -> GPU worker handoff): the front door is the process's, whichever thread reads it."""
    if p.upstream not in DEMAND_UPSTREAM or any(f.bound is not None for f in p.feeders) or hands_off_results(p):
        return False  # (a thread blocked handing results to a full queue waits on its consumer, not for work)
    if stacks_say(p, "network") and (p.upstream != "external"
                                     or (p.stacks is not None and p.stacks.calls >= STACK_MAJORITY)):
        return False  # in network calls with no connection accepted from outside, or awaiting the reply of a
        # service it called (an HTTP client): a client awaiting a service, not a server awaiting requests
    return p.stacks is None or (stacks_say(p, *WAITING_FOR_WORK, *SERVING)
                                and stacks_say(p, *WAITING_FOR_WORK, share=DEMAND_WAIT_MIN))


def waiting_servers(g: GpuWindow) -> list[ProcessWindow]:
    """Processes that use the GPU a little and whose feeding thread mostly sleeps waiting for work, moving
    no data while it waits: servers without requests."""
    idle = 100.0 - (g.busy or 0.0)

    def explains(p: ProcessWindow) -> float:
        return WAITING_EXPLAINS - (DEMAND_BAND if p.upstream == "external" else 0.0)

    return [p for p in g.processes
            if ((p.top_waits and waiting_for_work(p) >= explains(p) * idle) or idle_on_input(p))
            and demand_evidence(p) and top_cpu(p) < IDLE_CPU
            and not _moves_data(p) and not starved(p) and not gil_bound(p)
            and not (p.workers and (p.workers_cpu or 0.0) >= WORKERS_CPU)
            and ((p.sm_util_mean or 0.0) >= 1.0 or (g.busy or 0.0) >= 1.0)]


def demand_bound(g: GpuWindow) -> Finding | None:
    """Not a fault: the server waits for requests and the GPU has capacity to spare."""
    if g.busy is None or g.busy >= HEADROOM_UTIL:
        return None
    servers = waiting_servers(g)
    if not servers:
        return None
    p = max(servers, key=lambda q: q.sm_util_mean or 0.0)
    busy = g.busy
    headroom = f"the GPU idles {100 - busy:.0f}% of the time" + (
        f" (SM activity {g.sm_active:.0f}%)" if g.sm_active is not None else "")
    return finding(
        "demand_bound", "Demand-bound: the server waits for requests, the GPU has headroom", "info",
        DEMAND(100.0 - busy), g,
        gpu_evidence(g, f"{p.label}: its feeding thread waits for work {waiting_for_work(p):.0f}% of the time, "
                     f"CPU {p.cpu or 0:.0f}%", attribution_line(p), headroom),
        "Nothing to tune in the server: it is idle because no work arrives. The headroom is capacity: send "
        "it more traffic, consolidate services onto this GPU (or share it with MPS/MIG), or use a smaller "
        "GPU; keep enough headroom for bursts (p99 grows fast above ~85% SM activity).", pid=p.pid)
