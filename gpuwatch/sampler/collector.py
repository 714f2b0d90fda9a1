"""Turns the sources' Readings into one Snapshot per tick, without letting any source stall the tick.

Each source has a deadline. A poll that overruns (a hung NVML call, a slow DCGM endpoint, a /proc read
stuck on a process in D state) leaves that source ``stale``: its GPUs keep their identity but lose their
values until it answers again, and the other sources go on. A poll that raises leaves it ``error``.

Two ways to keep that promise:
  * :meth:`LiveCollector.collect` polls each source on its own worker thread and waits at most its deadline:
    the call returns in time whatever the sources do (a caller's one-off tick, the tests' ticks).
  * The sampler's loop uses :meth:`LiveCollector.collect_inline`: the polls run on the tick's own thread,
    with no hand-off (two worker wake-ups and two of the tick's own a tick, which in a 1 s daemon cost
    more than the work handed off). The sampler's watchdog asks :meth:`LiveCollector.take_over_overdue`
    every few seconds; a poll past its deadline is given up (its source ``stale``), the sampler ticks on
    from a new thread, and the hung thread, if its call ever returns, ends with :class:`TickTakenOver`
    without touching anything.
In both, a call still running from an earlier tick is not made again until it has returned.
"""

from __future__ import annotations

import dataclasses
import functools
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence

from gpuwatch.model import text
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Snapshot, SourceStatus
from gpuwatch.model.stacks import StackSample
from gpuwatch.sampler.sampler import TickTakenOver
from gpuwatch.sources.base import Reading, Source
from gpuwatch.sources.stack_source import StackSource

_IDENTITY = ("index", "uuid", "name", "pci_bus_id", "driver_version", "mem_total_bytes", "sm_clock_max_mhz")


class _Call:
    """One poll, handed to a worker thread or run on the tick's own, and its answer. The waiting tick blocks
    on a plain lock the worker releases when done: one C-level hand-off, where a
    ``concurrent.futures.Future`` wakes the tick through a Python ``Condition``."""

    __slots__ = ("_answered", "abandoned", "error", "fn", "value")

    def __init__(self, fn: Callable[[], Reading]) -> None:
        self.fn = fn
        self.value: Reading | None = None
        self.error: BaseException | None = None
        #: Given up by the watchdog while it ran on a tick's thread (under the collector's guard).
        self.abandoned = False
        self._answered = threading.Lock()
        self._answered.acquire()

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as exc:  # handed to the waiting tick, which reports it
            self.error = exc
        finally:
            self._answered.release()

    def done(self) -> bool:
        return not self._answered.locked()

    def wait(self, timeout: float) -> bool:
        """Whether the call was answered within ``timeout`` seconds."""
        if self._answered.acquire(timeout=max(0.0, timeout)):
            self._answered.release()
            return True
        return False


class _Worker:
    """One daemon thread running calls in order. Not a ThreadPoolExecutor: Python joins those threads at
    exit, so one hung call (NVML, a socket) would keep the process from ever exiting."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._started = False

    def submit(self, call: _Call) -> None:
        if not self._started:  # the sampler's loop polls on its own thread: most processes never need one
            self._started = True
            threading.Thread(target=self._run, name=self.name, daemon=True).start()
        self._calls.put(call)

    def _run(self) -> None:
        while (call := self._calls.get()) is not None:
            call.run()

    def shutdown(self) -> None:
        if self._started:
            self._calls.put(None)


class _Slot:
    """One source, its worker thread, the poll in flight and its health."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.pool = _Worker(f"gpuwatch-{source.name}")
        self.pending: _Call | None = None
        self.last_ok: float | None = None
        self.state = "ok"
        self.message: str | None = None
        #: Seconds the last poll ran on the worker, and the tick waited for it (the difference is the
        #: hand-off between threads): what a profile of the tick needs.
        self.ran_s = 0.0
        self.waited_s = 0.0
        #: The poll running on a tick's own thread, and since when (``time.monotonic()``): the watchdog's.
        self.inline: _Call | None = None
        self.inline_since = 0.0

    def _timed(self, now: float, pids: tuple[int, ...]) -> Reading:
        t0 = time.perf_counter()
        try:
            return self.source.poll(now, pids)
        finally:
            self.ran_s = time.perf_counter() - t0

    def poll(self, now: float, pids: Sequence[int], guard: threading.Lock | None = None) -> Reading | None:
        """This tick's reading; on this thread when ``guard`` (the collector's, shared with the watchdog)
        is given, else on the source's worker within its deadline."""
        t0 = time.perf_counter()
        try:
            return self._poll(now, pids, guard)
        finally:
            self.waited_s = time.perf_counter() - t0

    def _poll(self, now: float, pids: Sequence[int], guard: threading.Lock | None) -> Reading | None:
        if self.pending is not None:
            if not self.pending.done():
                # Still hung from an earlier tick: do not wait on it again, the tick must go on.
                self.state = "stale"
                return None
            self.pending = None  # a late answer belongs to an old tick: drop it and ask afresh
        self.pending = call = _Call(functools.partial(self._timed, now, tuple(pids)))
        if guard is not None:
            self._run_here(call, guard)
        else:
            self.pool.submit(call)
            if not call.wait(self.source.deadline_s):
                self.stale_since_deadline()
                return None
        self.pending = None
        if call.error is not None:
            if not isinstance(call.error, Exception):
                raise call.error  # KeyboardInterrupt, SystemExit: not a backend failure
            self.state = "error"  # a backend failure must never stop sampling
            self.message = f"{type(call.error).__name__}: {call.error}"
            return None
        assert call.value is not None
        self._ok(call.value)
        return call.value

    def _run_here(self, call: _Call, guard: threading.Lock) -> None:
        self.inline_since = time.monotonic()
        self.inline = call
        call.run()
        with guard:
            if call.abandoned:  # the watchdog gave this call up: a new thread ticks on, this one ends
                raise TickTakenOver(self.source.name)
            self.inline = None

    def give_up_if_overdue(self, now: float) -> bool:
        """Watchdog, under the collector's guard: give up the call running on a tick's thread when it is past
        its deadline (the call stays ``pending``: it is not made again until it has returned)."""
        call = self.inline
        if call is None or call.done() or now - self.inline_since < self.source.deadline_s:
            return False
        call.abandoned = True
        self.inline = None
        self.stale_since_deadline()
        return True

    def stale_since_deadline(self) -> None:
        self.state = "stale"
        self.message = f"no answer within {self.source.deadline_s:g} s (call still running)"

    def _ok(self, reading: Reading) -> None:
        if reading.stale is not None:  # an answer from the source's last good reading: used, marked stale
            self.state, self.message = "stale", reading.stale
            return
        self.state, self.message = "ok", None
        self.last_ok = time.monotonic()

    def status(self, started: float) -> SourceStatus:
        now = time.monotonic()
        age = 0.0 if self.state == "ok" else now - (self.last_ok if self.last_ok is not None else started)
        return SourceStatus(name=self.source.name, state=self.state, message=self.message,  # type: ignore[arg-type]
                            age_s=round(age, 3))

    def close(self) -> None:
        try:
            self.source.close()
        finally:
            self.pool.shutdown()


def _blank(gpu: GpuSample) -> GpuSample:
    """The GPU's identity without measurements: what a stale source can still truthfully say."""
    return GpuSample(**{name: getattr(gpu, name) for name in _IDENTITY})


def merge_gpu(base: GpuSample, other: GpuSample) -> GpuSample:
    """``base`` with the fields it lacks taken from ``other``; profiling, extra and labels are united."""
    updates: dict[str, object] = {}
    for f in dataclasses.fields(GpuSample):
        if f.name in ("profiling", "extra", "labels", "index"):
            continue
        if getattr(base, f.name) in (None, ()) and getattr(other, f.name) not in (None, ()):
            updates[f.name] = getattr(other, f.name)
    updates["profiling"] = {**other.profiling, **base.profiling}
    updates["extra"] = {**other.extra, **base.extra}
    updates["labels"] = {**other.labels, **base.labels}
    return dataclasses.replace(base, **updates)  # type: ignore[arg-type]


def merge_gpu_lists(base: tuple[GpuSample, ...], other: tuple[GpuSample, ...]) -> tuple[GpuSample, ...]:
    by_uuid = {g.uuid: g for g in other}
    by_index = {g.index: g for g in other}
    out = []
    for g in base:
        match = by_uuid.get(g.uuid) if g.uuid else None
        if match is None:  # by index only where one side has no UUID: never merge two different GPUs
            cand = by_index.get(g.index)
            if cand is not None and (not g.uuid or not cand.uuid):
                match = cand
        out.append(merge_gpu(g, match) if match is not None else g)
    uuids, indexes = {g.uuid for g in base}, {g.index for g in base}
    out.extend(g for g in other if g.uuid and g.uuid not in uuids and g.index not in indexes)
    return tuple(out)


def label_gpus(gpus: tuple[GpuSample, ...], processes: tuple[ProcessSample, ...],
               labels: dict[str, dict[str, str]]) -> tuple[tuple[GpuSample, ...], tuple[ProcessSample, ...]]:
    """GPUs with the labels given for their UUID; processes with their GPU's pod, when one container holds
    it (a GPU shared by several pods names them all, comma-separated, and no process can be told apart)."""
    out = tuple(dataclasses.replace(g, labels={**g.labels, **labels[g.uuid]}) if g.uuid in labels else g
                for g in gpus)
    pods = {g.index: g.pod_labels() for g in out if g.uuid in labels}
    procs = []
    for p in processes:
        pod = pods.get(p.gpu_index)
        if pod is None or any("," in v for v in pod.values()):
            procs.append(p)
        else:
            procs.append(dataclasses.replace(p, **{k: v or None for k, v in pod.items()}))  # type: ignore[arg-type]
    return out, tuple(procs)


class LiveCollector:
    """Polls the sources in order (GPU sources, then host) and builds a Snapshot. ``stacks`` (optional)
    samples the stacks of the processes on under-used GPUs in the background: each tick offers it the merged
    processes and takes the windows it finished, without waiting."""

    def __init__(self, sources: Sequence[Source], hostname: str | None = None,
                 stacks: StackSource | None = None) -> None:
        self.slots = [_Slot(s) for s in sources]
        self.stacks = stacks
        self.hostname = hostname or socket.gethostname()
        self.seq = 0
        self._started = time.monotonic()
        self._last_gpus: dict[str, tuple[GpuSample, ...]] = {}
        self._lock = threading.Lock()
        #: Orders a poll's return on a tick's thread against the watchdog giving it up.
        self._guard = threading.Lock()
        #: How often the sampler's watchdog should look for a poll past its deadline: the shortest deadline.
        self.watch_s = min((s.deadline_s for s in sources), default=2.0)

    def timings(self) -> dict[str, tuple[float, float]]:
        """Per source, seconds (ran, waited for by the tick: the same when it ran on the tick's thread) in the
        last tick."""
        return {slot.source.name: (slot.ran_s, slot.waited_s) for slot in self.slots}

    def collect(self) -> Snapshot:
        """A Snapshot within the sources' deadlines, on any thread (each poll on its source's worker)."""
        with self._lock:
            return self._collect(None)

    def collect_inline(self) -> Snapshot:
        """A Snapshot polled on this thread: the sampler loop's, which a watchdog guards through
        :meth:`take_over_overdue`. Raises :class:`TickTakenOver` on a thread whose poll was given up."""
        return self._collect(self._guard)

    def take_over_overdue(self) -> bool:
        """Watchdog: give up a poll running past its deadline on a tick's thread; True when one was (the
        caller then ticks on from a new thread)."""
        now = time.monotonic()
        with self._guard:
            return any([slot.give_up_if_overdue(now) for slot in self.slots])

    def _collect(self, guard: threading.Lock | None) -> Snapshot:
        now = time.monotonic()
        gpus: tuple[GpuSample, ...] | None = None
        processes: list[ProcessSample] = []
        host: HostSample | None = None
        details: dict[int, dict[str, object]] = {}
        feeders: list[FeederSample] = []
        for slot in (s for s in self.slots if s.source.role == "gpu"):
            reading = slot.poll(now, (), guard)
            if reading is not None and reading.gpus is not None:
                self._last_gpus[slot.source.name] = reading.gpus
                found = reading.gpus
            else:
                found = tuple(_blank(g) for g in self._last_gpus.get(slot.source.name, ()))
            gpus = found if gpus is None else merge_gpu_lists(gpus, found)
            if reading is not None and reading.processes:
                processes.extend(reading.processes)
        pids = sorted({p.pid for p in processes})
        for slot in (s for s in self.slots if s.source.role == "host"):
            reading = slot.poll(now, pids, guard)
            if reading is not None:
                host = reading.host or host
                details.update(reading.process_details)
                feeders.extend(reading.feeders)
        merged = tuple(dataclasses.replace(p, **details[p.pid]) if p.pid in details else p  # type: ignore[arg-type]
                       for p in processes)
        labels: dict[str, dict[str, str]] = {}
        for slot in (s for s in self.slots if s.source.role == "labels"):
            reading = slot.poll(now, pids, guard)
            if reading is not None:
                labels.update(reading.gpu_labels)
        if labels:
            gpus, merged = label_gpus(gpus or (), merged, labels)
        statuses = tuple(slot.status(self._started) for slot in self.slots)
        stacks: tuple[StackSample, ...] = ()
        if self.stacks is not None:
            stacks = self.stacks.take()
            self.stacks.offer(gpus or (), merged, feeders)
            statuses += (self.stacks.status(),)
        self.seq += 1
        # Names from /proc, NVML, DCGM and the kubelet may hold bytes that are not UTF-8: cleaned here, once.
        return text.record(Snapshot(
            time=time.time(),
            host=host or HostSample(hostname=self.hostname),
            gpus=gpus or (),
            processes=merged,
            sources=statuses,
            stacks=stacks,
            feeders=tuple(feeders),
            seq=self.seq,
        ))

    def close(self) -> None:
        if self.stacks is not None:
            self.stacks.close()
        for slot in self.slots:
            slot.close()
