"""Where an under-used GPU's idle time goes, thread by thread: the attribution every CPU-side finding
starts from.

The feeding thread (the process's busiest) spends each second in one of a few places: on a core,
runnable but waiting for a core (the kernel's run-queue delay), asleep on a lock (a futex: the GIL or a
queue), waiting for input (a socket, pipe or poll set), in storage I/O, in a timed sleep, or in the GPU
driver. The first two are measured (CPU time and schedstat's run delay over the interval); the sleeping
rest is split by what the thread was seen waiting on at each sample. The classes are then read off this
split, so a new shape of a known cause lands on the mechanism rather than between fitted thresholds:

* on a core nearly all the time: the thread itself is the limit (Python work, launches, staged copies);
* runnable without a core: the host is oversubscribed, or the process's own CPU limit (a cgroup quota, its
  affinity) is used up while the host's cores idle;
* several working threads whose CPU sums to about one core, none pegged: they take turns on the GIL;
* asleep waiting for input, little I/O: the server has no work (demand-bound);
* in storage I/O, or moving bytes while it sleeps: storage or the network holds it back.
"""

from __future__ import annotations

from gpuwatch.doctor.process_window import ProcessWindow
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.thread_wait import WAIT_WORDS, WAITS

PEGGED_THREAD = 85.0  # a thread at this share of one core is the limit of a single-threaded loop
#: Percent of wall time the feeding thread spends runnable without a core, from which the host, not the
#: program, sets the pace (a thread alone on an idle host waits well under 1 %).
RUN_WAIT_TOP = 15.0
#: The same for all the process's threads together, percent of one core.
RUN_WAIT_ALL = 30.0
HOST_BUSY = 90.0  # host CPU percent from which no core is idle
#: Percent of its quota's periods a cgroup is throttled in from which the quota, not the program, sets the pace:
#: a quota that fits the load throttles in a few periods at start-up bursts, none in steady state.
THROTTLED_PERIODS = 20.0
#: Share of its CPU limit a process uses from which a wait for a core is its limit's even on a full host.
LIMIT_USED = 0.8
#: Share of samples in state T from which the process's stops are counted in the feeding thread's time.
STOPPED_SEEN = 0.25
#: GIL contention: at least two working threads whose CPU together is about one core (the GIL lets one run
#: Python at a time), none of them pegged.
GIL_THREADS = 2.0
GIL_CORES = (60.0, 140.0)
#: A server is demand-bound when its feeding thread's time asleep waiting for work (input, a lock or a
#: timer, percent of wall time) accounts for at least this share of the GPU's idle time: the GPU idles
#: because the thread that would feed it has nothing to do. (A serving thread's CPU includes spinning in
#: CUDA synchronise while the GPU works, so the waiting share alone would understate it.)
WAITING_EXPLAINS = 0.5
IDLE_CPU = 50.0  # a feeding thread under half a core is not what holds a GPU back by computing


def top_cpu(p: ProcessWindow) -> float:
    return p.top_thread_cpu or 0.0


def time_split(p: ProcessWindow) -> dict[str, float]:
    """The feeding thread's time, percent of wall time per wait class (``model.thread_wait``): CPU and
    run-queue delay measured, the rest split by the wait classes seen while it slept."""
    on_cpu = min(100.0, top_cpu(p))
    runnable = min(100.0 - on_cpu, p.top_run_wait or 0.0)
    asleep = {w: s for w, s in p.top_waits.items() if w not in ("cpu", "stopped")}
    if not asleep:  # a quiet process's threads are read every few seconds; its main thread's wait, every sample
        asleep = {w: s for w, s in p.main_waits.items() if w not in ("cpu", "stopped", "other")}
    total = sum(asleep.values())
    rest = max(0.0, 100.0 - on_cpu - runnable)
    split = {"cpu": on_cpu, "runnable": runnable}
    # the process's state, read every sample, says how long it was stopped; that time is off the core too. A few
    # samples in T are not counted: on recordings made before tracing stops (t) were kept apart, the stack
    # sampler's own pauses show as T in up to a seventh of samples
    share = p.stopped_share or 0.0
    stopped = min(rest, 100.0 * share) if share >= STOPPED_SEEN else 0.0
    if stopped > 0:
        split["stopped"], rest = stopped, rest - stopped
    if total > 0:
        split.update({w: rest * s / total for w, s in asleep.items()})
    elif rest > 0:
        split["other"] = rest
    return split


def attribution_line(p: ProcessWindow) -> str:
    """"feeding thread 4123: 58% on a core, 11% runnable without a core, 31% waiting on a lock (futex)"."""
    split = time_split(p)
    words = {**WAIT_WORDS, "runnable": "runnable without a core"}
    order = ["cpu", "runnable", *(w for w in WAITS if w != "cpu")]
    parts = [f"{split[w]:.0f}% {words[w]}" for w in order if split.get(w, 0.0) >= 1.0]
    thread = f"thread {p.top_thread_id}" if p.top_thread_id is not None else "busiest thread"
    return f"{p.label}, feeding {thread}: " + (", ".join(parts) or "no time measured")


def threads_line(p: ProcessWindow) -> str | None:
    """The working threads together: how many, their CPU, their run-queue delay."""
    if p.threads_cpu is None:
        return None
    line = (f"{p.label}: {p.busy_threads or 0:.0f} threads at 10% of a core or more, "
            f"{p.threads_cpu:.0f}% of one core together")
    if p.run_wait is not None:
        line += f"; all threads {p.run_wait:.0f}% of a core runnable without a core"
    return line


def spare_cores(g: GpuWindow) -> float | None:
    if g.host_cpu_count is None or g.host_cpu is None:
        return None
    return g.host_cpu_count * (100.0 - g.host_cpu) / 100.0


def host_line(g: GpuWindow) -> str | None:
    spare = spare_cores(g)
    if spare is None:
        return None
    running = "" if g.host_procs_running is None else f", {g.host_procs_running:.0f} threads runnable"
    return f"host: {spare:.1f} of {g.host_cpu_count} cores idle (CPU {g.host_cpu:.0f}%{running})"


def host_saturated(g: GpuWindow) -> bool:
    """No core idle: the host's CPU near full, or more threads runnable than cores."""
    busy = g.host_cpu is not None and g.host_cpu >= HOST_BUSY
    queued = g.host_procs_running is not None and g.host_cpu_count is not None \
        and g.host_procs_running > g.host_cpu_count
    return busy or queued


def starved(p: ProcessWindow) -> bool:
    """The process's threads want a core and get none for a real share of the time."""
    return (p.top_run_wait or 0.0) >= RUN_WAIT_TOP or (p.run_wait or 0.0) >= RUN_WAIT_ALL


def feeders_starved(p: ProcessWindow) -> bool:
    """Most of the process's sampled feeders (its worker children) want a core and get none for a real share
    of the time: they oversubscribe the host, they are not a loader that is simply busy."""
    waits = [f.run_wait for f in p.feeders if f.run_wait is not None]
    return bool(waits) and sum(w >= RUN_WAIT_TOP for w in waits) > len(waits) / 2


def limit_bound(p: ProcessWindow, g: GpuWindow) -> bool:
    """Held by its own CPU limit, not the host's: a limit below the host's cores (a cgroup quota, an
    affinity), and its cgroup throttled in a real share of periods, or its threads (or workers) waiting for a
    core while it uses its allowance or the host has cores to spare (on a full host, a process well under its
    limit waits for the host's cores, not for its limit)."""
    if p.cpu_limit is None:
        return False
    if (p.throttled or 0.0) >= THROTTLED_PERIODS:
        return True
    uses_it = (p.cpu or 0.0) >= LIMIT_USED * 100.0 * p.cpu_limit
    return (starved(p) or feeders_starved(p)) and (uses_it or not host_saturated(g))


def limit_line(p: ProcessWindow) -> str:
    """The limit as evidence: ``pid 9 (python3) may use 2 cores (its cgroup quota); throttled in 94% of
    periods; its threads use 1.9``."""
    cores = f"{p.cpu_limit:g} core" + ("" if p.cpu_limit == 1 else "s")
    parts = [f"{p.label} may use {cores} ({'its ' + p.cpu_limit_by if p.cpu_limit_by else 'its CPU limit'})"]
    if p.throttled is not None:
        parts.append(f"its cgroup throttled in {p.throttled:.0f}% of its quota's periods")
    if p.cpu is not None:
        parts.append(f"the process uses {p.cpu / 100:.1f} cores")
    if p.limit_peers:
        parts.append("under the same quota: " + ", ".join(f"pid {pid} ({name}) {cpu:.0f}%" for pid, name, cpu
                                                           in p.limit_peers))
    return "; ".join(parts)


def peers_take_the_quota(p: ProcessWindow) -> bool:
    """Other processes under its quota use more of it than the process itself does."""
    return sum(cpu for _, _, cpu in p.limit_peers) > (p.cpu or 0.0)


def gil_bound(p: ProcessWindow) -> bool:
    """Several working threads, together about one core, none pegged and none starved of a core: the
    signature of Python threads taking turns on the GIL."""
    if p.threads_cpu is None or p.busy_threads is None:
        return False
    return (p.busy_threads >= GIL_THREADS and GIL_CORES[0] <= p.threads_cpu <= GIL_CORES[1]
            and top_cpu(p) < PEGGED_THREAD and not starved(p))


WORK_WAITS = ("input", "lock", "sleep")
#: A process under this share of a core, all threads together, whose main thread sleeps on a socket, a pipe
#: or a queue in most samples, is idle waiting for work even where its busiest thread's samples are few.
IDLE_PROCESS_CPU = 15.0
MAIN_WAITING_SHARE = 0.6


def idle_on_input(p: ProcessWindow) -> bool:
    """The whole process nearly idle, its main thread asleep on input or a queue in most samples."""
    main = p.main_waits.get("input", 0.0) + p.main_waits.get("lock", 0.0)
    return p.cpu is not None and p.cpu < IDLE_PROCESS_CPU and main >= MAIN_WAITING_SHARE


def waiting_for_work(p: ProcessWindow) -> float:
    """Percent of wall time the feeding thread sleeps waiting for something to do (input, a lock, a timer)."""
    split = time_split(p)
    return sum(split.get(w, 0.0) for w in WORK_WAITS)
