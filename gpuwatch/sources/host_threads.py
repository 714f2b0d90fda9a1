"""Where a GPU process's threads spend their time, tick by tick, without reading every thread every tick.

A serving process has 20-60 threads, most of them idle pool threads, and reading each one's stat file every
tick was most of the host source's cost. So a *full scan* reads them all (state, CPU, run-queue delay),
and between full scans a tick reads only the *hot* threads: the main thread and those that were working,
running or in I/O wait at the last full scan. The tick then checks that the hot threads explain the whole
process's CPU (one read of /proc/PID/stat, which counts every thread): when they do not (a thread woke
up), or FULL_SCAN_EVERY_S has passed, or a hot thread ended, it scans them all at once. What a tick did
not read (an idle thread's state and run delay) is what the last full scan found. In a full scan a thread
asleep at the last one that has not run since costs one read of its schedstat, not of its stat
(:func:`procfs.read_thread_stats`).

A process under THREAD_SCAN_CPU of a core cannot hold a pegged thread: its threads are read (the hot
ones, or all when a full scan is due) every THREADS_EVERY_S, and in between it has the last read's fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwatch.model.thread_wait import classify_wait
from gpuwatch.sources.procfs import forget_threads, read_run_wait, read_thread_stats, read_thread_wait_channel

THREAD_SCAN_CPU = 25.0
THREADS_EVERY_S = 2.0
#: A thread at this share of a core or more is one of the process's working threads: its wait class and
#: run-queue delay are read (idle pool threads, often dozens, are not).
ACTIVE_THREAD_CPU = 2.0
MAX_THREADS_SHOWN = 8
#: Every thread is read at least this often, for the states and run delay of the idle ones.
FULL_SCAN_EVERY_S = 5.0
#: CPU seconds the hot threads may leave unexplained before every thread is read again: three clock ticks
#: (what /proc's rounding can hide at a 0.1 s interval), or a tenth of the process's CPU when that is more.
UNTRACKED_S = 0.03
UNTRACKED_SHARE = 0.1
#: At most this many hot threads (an oversubscribed process can have dozens runnable).
MAX_HOT = 32

Threads = dict[int, tuple[str, float]]


@dataclass
class ThreadTracker:
    """One process's threads between ticks. Per thread: the CPU seconds and run-queue seconds last read,
    each with when it was read (threads are read at different ticks), and what that read found."""

    pid: int
    cpu_base: dict[int, tuple[float, float]] = field(default_factory=dict)
    wait_base: dict[int, tuple[float, float]] = field(default_factory=dict)
    states: dict[int, str] = field(default_factory=dict)
    cpu: dict[int, float] = field(default_factory=dict)
    delay: dict[int, float] = field(default_factory=dict)
    #: Threads read every tick until the next full scan.
    hot: tuple[int, ...] = ()
    read_at: float = float("-inf")
    full_at: float = float("-inf")
    #: The whole process's CPU seconds when its threads were last read.
    process_cpu: float = 0.0
    #: The fields the last read gave (held while the process is quiet).
    fields: dict[str, Any] = field(default_factory=dict)

    def baseline(self, now: float, process_cpu: float) -> None:
        """Every thread's CPU now, so the first tick has rates."""
        threads = read_thread_stats(self.pid) or {}
        self.cpu_base = {tid: (c, now) for tid, (_, c) in threads.items()}
        self.states = {tid: s for tid, (s, _) in threads.items()}
        self.read_at, self.process_cpu = now, process_cpu

    def update(self, now: float, process_cpu: float, cpu_pct: float | None,
               main_state: str | None = None) -> dict[str, Any]:
        """This tick's thread fields for a process at ``cpu_pct`` of a core (None: not known yet), its main
        thread in ``main_state`` (this tick's /proc/PID/stat); the caller copies them and never changes them
        (between reads the same fields are given tick after tick, but for the main thread's state: a process
        caught in D state once, a vfork or a page fault, is not in I/O wait until its threads are read again)."""
        if main_state is not None and self.pid in self.states:
            self.states[self.pid] = main_state
        busy = cpu_pct is None or cpu_pct >= THREAD_SCAN_CPU
        if not busy and now - self.read_at < THREADS_EVERY_S and self.fields:
            held = {**self.fields, **self._counts()}
            top = held.get("top_thread_cpu_percent")
            if top is not None and cpu_pct is not None and top > cpu_pct:
                held["top_thread_cpu_percent"] = cpu_pct  # never above the whole process
            return held
        if self.hot and now - self.full_at < FULL_SCAN_EVERY_S:
            hot = read_thread_stats(self.pid, self.hot)
            if hot is not None and self._explains(hot, process_cpu):
                return self.read(hot, now, process_cpu, full=False)
        threads = read_thread_stats(self.pid)
        if threads is None:
            return {}
        return self.read(threads, now, process_cpu, full=True)

    def _explains(self, hot: Threads, process_cpu: float) -> bool:
        """Whether the hot threads account for the process's CPU since the last read (and are all alive)."""
        if len(hot) < len(self.hot):
            return False
        used = process_cpu - self.process_cpu
        by_hot = sum(max(0.0, c - self.cpu_base[tid][0]) for tid, (_, c) in hot.items() if tid in self.cpu_base)
        return used - by_hot <= max(UNTRACKED_S, UNTRACKED_SHARE * used)

    def read(self, threads: Threads, now: float, process_cpu: float, full: bool) -> dict[str, Any]:
        """Take in one read of ``threads`` (all of them when ``full``) and give the process's thread fields."""
        had_rates = any(tid in self.cpu_base for tid in threads)
        for tid, (state, c) in threads.items():
            base = self.cpu_base.get(tid)
            self.cpu[tid] = max(0.0, 100.0 * (c - base[0]) / (now - base[1])) if base and now > base[1] else 0.0
            self.cpu_base[tid], self.states[tid] = (c, now), state
        if full:
            ended = set(self.cpu_base) - set(threads)
            for table in (self.cpu_base, self.states, self.cpu, self.delay, self.wait_base):
                for gone in set(table) - set(threads):
                    del table[gone]
            forget_threads(self.pid, ended)  # their held /proc files
            self.full_at = now
        self.read_at, self.process_cpu = now, process_cpu
        out = self._counts()
        if threads and had_rates:
            out.update(self._attribution(threads, now))
        if full:
            self.hot = self._hot()
        self.fields = out
        return out

    def _counts(self) -> dict[str, Any]:
        """How many threads are in I/O wait (D) and running (R), as last read (the main thread, this tick)."""
        return {"threads_in_io_wait": sum(1 for s in self.states.values() if s == "D"),
                "threads_running": sum(1 for s in self.states.values() if s == "R")}

    def _attribution(self, threads: Threads, now: float) -> dict[str, Any]:
        """Where the process's time went, thread by thread: each working thread's CPU, its time runnable
        without a core, and what it waits on now (the busiest thread always, so a server that sleeps waiting
        for requests still says where)."""
        first = not self.wait_base
        complete = True
        for tid, (state, _) in threads.items():
            if self.cpu[tid] <= 0.0 and state != "R":
                self.delay[tid] = 0.0  # asleep all along: its run-queue time did not move
                continue
            seconds = read_run_wait(self.pid, tid)
            if seconds is None:
                complete = False
                continue
            base = self.wait_base.get(tid)
            if base is not None and now > base[1]:
                self.delay[tid] = max(0.0, 100.0 * (seconds - base[0]) / (now - base[1]))
            self.wait_base[tid] = (seconds, now)
        cpu, main = self.cpu, self.pid

        def order(tid: int) -> tuple[float, bool]:  # busiest first, the main thread on a tie
            return -cpu[tid], tid != main

        # only the working threads are ranked (the dozens of idle ones are not sorted every read)
        shown = sorted([tid for tid, c in cpu.items() if c >= ACTIVE_THREAD_CPU], key=order)[:MAX_THREADS_SHOWN] \
            or [min(cpu, key=order)]
        top = shown[0]
        out: dict[str, Any] = {
            "top_thread_cpu_percent": round(cpu[top], 1), "top_thread_id": top,
            "thread_cpu_percents": tuple(round(self.cpu[tid], 1) for tid in shown),
            "thread_waits": tuple(classify_wait(self.states[tid], None if self.states[tid] == "R"
                                                else read_thread_wait_channel(self.pid, tid)) for tid in shown)}
        if complete and self.wait_base and not first:
            out["thread_run_wait_percents"] = tuple(round(self.delay.get(tid, 0.0), 1) for tid in shown)
            out["run_wait_percent"] = round(sum(self.delay.values()), 1)
        return out

    def _hot(self) -> tuple[int, ...]:
        """The main thread, then the working, running and I/O-waiting threads, busiest first."""
        cpu, states = self.cpu, self.states
        hot = sorted([tid for tid, c in cpu.items() if c >= ACTIVE_THREAD_CPU or states.get(tid) in ("R", "D")],
                     key=lambda tid: -cpu[tid])
        return tuple(dict.fromkeys([self.pid, *hot]))[:MAX_HOT] if self.pid in self.cpu else tuple(hot[:MAX_HOT])
