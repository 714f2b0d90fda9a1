"""The general finding: a GPU waits and no class explains it, so where the feeding thread's time goes, by
mechanism and code location (its stacks), else by wait class (``/proc``). Two stories come before the frames:
a process something outside it stops (its stacks show only where it was stopped), and CPU the kernel spends
on its behalf (its frames show the line, the kernel's counters what the time goes to: ``kernel_time``).
"""

from __future__ import annotations

import dataclasses

from gpuwatch.doctor.attribution import attribution_line, host_line, threads_line, time_split
from gpuwatch.doctor.evidence import finding, gpu_evidence
from gpuwatch.doctor.kernel_time import COMPUTING_FRAMES, kernel_line, kernel_mechanism
from gpuwatch.doctor.mechanisms import advice, words
from gpuwatch.doctor.process_window import TIMER_POLLS, ProcessWindow
from gpuwatch.doctor.rules_evidence import UNDER_USED, feeding_process, hands_off_results
from gpuwatch.doctor.scores import IDLE_BREAKDOWN
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.finding import Finding
from gpuwatch.model.thread_wait import WAIT_WORDS

#: Percent of wall time the feeding thread is stopped (SIGSTOP, a debugger, a freezer) from which that is the
#: story: its stacks then show where it was stopped, not what it was doing.
STOPPED_MOST = 50.0


def idle_breakdown(g: GpuWindow) -> Finding | None:
    """Never silent while a GPU waits and no class explains it: where the feeding thread's time goes,
    ranked by mechanism and code location, with the advice the top mechanism implies (``diagnose`` calls it
    only when no finding explains the idle time)."""
    if g.busy is None or g.busy >= UNDER_USED:
        return None
    p = feeding_process(g)
    if p is None:
        return None
    idle = 100.0 - g.busy
    split = time_split(p)
    if split.get("stopped", 0.0) >= STOPPED_MOST:
        return _stopped(g, p, idle, split)
    # the kernel's counters say where its CPU goes when its (computing) frames cannot
    kernel = kernel_mechanism(p)
    if p.stacks is not None:
        ev = p.stacks
        top = ev.locations[0]
        kernel = kernel if top[2] in COMPUTING_FRAMES else None
        handing = hands_off_results(p)  # it waits on what comes after it, not on what feeds it
        title = (f"GPU idle {idle:.0f}% of the window: the feeding thread spends {100 * top[1]:.0f}% in {top[0]} "
                 f"({HANDING_OFF if handing else words(kernel or top[2])})")
        lines: tuple[str | None, ...] = (ev.line(f"{p.label}, feeding thread"),)
        said = advice(kernel or ev.mechanism)
        fix = _HANDOFF_FIX if handing else (said[0].upper() + said[1:] + "." if said else
                                            "Open the top code location: that is where the idle time is spent.")
        if ev.holders is not None and not (handing and ev.holders.working < CONSUMER_WORKS):
            # (a process queue's own writer thread waits too: only threads that work are its consumers)
            lines = (*lines, ev.holders.line("the threads that take its results" if handing else
                                             "the threads it waits for"))
        if handing:
            lines = (*lines, *(f"its consumer: {f.line()}" for f in p.feeders if f.bound is not None))
        lines = (*lines, _lock_holder_line(p), _timer_line(p))
    else:
        top_wait = max(split, key=lambda w: split[w])
        where = WAIT_WORDS.get(top_wait, "runnable without a core")
        title = f"GPU idle {idle:.0f}% of the window: the feeding thread is {split[top_wait]:.0f}% {where}"
        kernel = kernel if top_wait == "cpu" else None
        if kernel:
            title += f", {words(kernel)}"
        why = g.stacks_problem or "no stack samples in this window"
        lines = (attribution_line(p), _lock_holder_line(p), _timer_line(p), threads_line(p), host_line(g),
                 f"stacks not available: {why}")
        fix = (f"See what the feeding thread does: py-spy dump --pid {p.pid} (Python stacks), and nsys profile "
               "for the GPU timeline; check for sleeps, remote calls, locks and syncs in the request path.")
        if kernel:
            said = advice(kernel)
            fix = said[0].upper() + said[1:] + ". " + fix
    found = finding("idle_breakdown", title, "warning", IDLE_BREAKDOWN(idle), g,
                    gpu_evidence(g, f"the GPU idles {idle:.0f}% of the time while {p.label} holds it", *lines,
                                 kernel_line(p, kernel) if kernel else None), fix, pid=p.pid)
    # the frames keep the code location; the kernel says what the time there goes to
    return dataclasses.replace(found, mechanism=kernel) if kernel else found


#: Share of the other threads' samples at work from which they are the consumers a thread handing its results
#: over waits on (a multiprocessing queue's writer thread only waits; a post-processing thread works).
CONSUMER_WORKS = 0.1
#: How the title says a thread that waits to put its results on a full queue.
HANDING_OFF = "handing its results to a full queue: what takes them is slower than the GPU makes them"
_HANDOFF_FIX = ("The GPU loop blocks until a slower consumer (post-processing, detokenising, writing responses) "
                "takes its results: speed that consumer up or run more of them, hand results over in batches, "
                "move the post-processing onto the GPU, or never block the GPU loop on a full queue (put_nowait, "
                "and drop or spill when it is full); a bigger queue only delays the stall.")


def _timer_line(p: ProcessWindow) -> str | None:
    """Its main thread polls on nothing another process could send: an event loop or a select asleep on a
    timer, whose coroutine (suspended in the loop) no stack sample shows."""
    share = p.poll_timer_share
    if share is None or share < TIMER_POLLS:
        return None
    return (f"{p.label}: in {100 * share:.0f}% of the samples that found its main thread in poll/select/epoll, "
            "nothing another process could send would wake it (no descriptors, or only its own wake-ups): a "
            "timer ends the wait (asyncio.sleep, a select or wait_for timeout); a suspended coroutine shows in "
            "no stack sample, so look for those in its coroutines")


def _lock_holder_line(p: ProcessWindow) -> str | None:
    if p.file_lock_holder is None:
        return None
    pid, name = p.file_lock_holder
    return f"{p.label} waits on a file lock held by pid {pid}" + (f" ({name})" if name else "")


def _stopped(g: GpuWindow, p: ProcessWindow, idle: float, split: dict[str, float]) -> Finding:
    """Something stops the process that feeds the GPU: no code of its own is to blame, and its stacks are only
    where it was stopped. Its share of samples in state T can exceed the stopped time the title gives, which
    the time it ran on a core bounds: the evidence says both."""
    stopped = split["stopped"]
    return finding(
        "idle_breakdown", f"GPU idle {idle:.0f}% of the window: the feeding process is stopped {stopped:.0f}% of the "
        "time (SIGSTOP, a debugger or a cgroup freezer)", "warning", IDLE_BREAKDOWN(idle), g,
        gpu_evidence(g, f"the GPU idles {idle:.0f}% of the time while {p.label} holds it", attribution_line(p),
                     f"{p.label} was stopped (state T) or frozen in {100 * (p.stopped_share or 0.0):.0f}% of samples; "
                     f"it ran on a core {split.get('cpu', 0.0):.0f}% of the window",
                     None if p.stacks is None else "its stack samples show where it was stopped, not work it did"),
        "Something outside the program stops it: a job controller or script sending SIGSTOP and SIGCONT "
        "(preemption, a gang scheduler, a watchdog), a debugger or profiler that pauses it (gdb, a blocking "
        "py-spy or perf), or a cgroup freezer (docker pause, cgroup.freeze). Find it: grep TracerPid "
        f"/proc/{p.pid}/status (a tracer's pid), cat the cgroup's cgroup.events (frozen 1), and audit who sends "
        "the signals (auditctl -a always,exit -F arch=b64 -S kill -S tgkill).", pid=p.pid)
