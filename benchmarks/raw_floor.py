"""The raw floor a tick is compared with: the very NVML and psutil calls a tick makes, called bare.

``TracingNvml`` stands in for the pynvml module (NvmlSource takes its module by injection) and records
every ``nvml*`` function call of a tick with its exact arguments. :func:`nvml_floor` then returns a
function that makes those same calls, in the same order, with nothing around them: no Getter objects,
no conversions, no worker thread, no Snapshot. :func:`host_floor` does the same for the host source's
psutil and /proc reads for the same pids. The tick's overhead is its time over these floors.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import psutil

_STATEFUL = frozenset({"nvmlDeviceGetProcessUtilization"})

Call = tuple[str, Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class TracingNvml:
    """A module-like proxy over pynvml that records calls while ``recording`` is set."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.recording = False
        self.calls: list[Call] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name == "_nvmlGetFunctionPointer":  # C functions called directly: traced under their symbol
            return self._lookup(attr)
        if not (name.startswith("nvml") and callable(attr)) or isinstance(attr, type):
            return attr  # constants, structures, exception classes: the real ones

        def traced(*args: Any, **kwargs: Any) -> Any:
            if self.recording:
                self.calls.append((name, attr, args, kwargs))
            return attr(*args, **kwargs)

        traced.__name__ = name
        return traced

    def _lookup(self, get: Callable[[str], Any]) -> Callable[[str], Any]:
        def lookup(symbol: str) -> Any:
            attr = get(symbol)

            def traced(*args: Any) -> Any:
                if self.recording:
                    self.calls.append((symbol, attr, args, {}))
                return attr(*args)

            return traced

        return lookup

    def record(self, fn: Callable[[], object]) -> list[Call]:
        """The NVML calls ``fn`` makes."""
        self.calls = []
        self.recording = True
        try:
            fn()
        finally:
            self.recording = False
        return list(self.calls)


def typical_calls(tracer: TracingNvml, tick: Callable[[], object], ticks: int = 7,
                  gap_s: float = 0.15) -> list[Call]:
    """The call list of a typical tick: the most common call sequence over ``ticks`` ticks, ``gap_s`` apart
    as at a sampling interval (slow-cadence ticks that also read energy, ECC or PCIe throughput are the
    exception, not the floor; ticks under 100 ms apart would skip GPM)."""
    traces = []
    for _ in range(ticks):
        time.sleep(gap_s)
        traces.append(tracer.record(tick))
    shapes = Counter(tuple(name for name, *_ in t) for t in traces)
    common = shapes.most_common(1)[0][0]
    return next(t for t in traces if tuple(name for name, *_ in t) == common)


def nvml_floor(calls: Sequence[Call], error: type[BaseException]) -> Callable[[], None]:
    """The recorded calls, bare. One call needs state even bare: per-process utilisation asks for samples
    newer than the last one seen, so the floor carries that timestamp forward as any caller must (with the
    recorded one, the driver would return its whole buffer, a dearer call than the tick makes). Called
    directly (its C function: handle, buffer, count, timestamp), it gets the same with the buffer's room as
    the count."""
    bound = [(fn, args, kwargs) for name, fn, args, kwargs in calls if name not in _STATEFUL]
    util = [(fn, args) for name, fn, args, _ in calls if name in _STATEFUL]
    last_ts = {id(args[0]): int(time.time() * 1e6) - 1_000_000 for _, args in util}

    def floor() -> None:
        for fn, args, kwargs in bound:
            try:
                fn(*args, **kwargs)
            except error:
                pass
        for fn, args in util:
            handle = args[0]
            if len(args) == 4:  # the C function: NVML's code is returned, the samples are in the buffer
                count = ctypes.c_uint(len(args[1]))
                if fn(handle, args[1], ctypes.byref(count), ctypes.c_ulonglong(last_ts[id(handle)])) != 0:
                    continue
                samples = args[1][:count.value]
            else:
                try:
                    samples = fn(handle, last_ts[id(handle)])
                except error:
                    continue
            for s in samples:
                if s.timeStamp > last_ts[id(handle)]:
                    last_ts[id(handle)] = s.timeStamp

    return floor


def per_call_us(calls: Sequence[Call], error: type[BaseException], n: int = 50) -> dict[str, float]:
    """Median microseconds of each recorded call alone (``name#2`` for a name's second call): which
    driver call the floor is made of."""
    out: dict[str, float] = {}
    seen: Counter[str] = Counter()
    for name, fn, args, kwargs in calls:
        if name in _STATEFUL:
            since = int(time.time() * 1e6) - 200_000
            if len(args) == 4:  # the C function called directly: handle, buffer, count, timestamp
                args = (args[0], args[1], ctypes.byref(ctypes.c_uint(len(args[1]))), ctypes.c_ulonglong(since))
            else:
                args = (args[0], since)
        seen[name] += 1
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            try:
                fn(*args, **kwargs)
            except error:
                pass
            samples.append(time.perf_counter() - t0)
        samples.sort()
        out[name if seen[name] == 1 else f"{name}#{seen[name]}"] = round(samples[len(samples) // 2] * 1e6, 1)
    return out


def describe(calls: Sequence[Call]) -> dict[str, int]:
    """``{function name: calls per tick}``, for the report."""
    return dict(Counter(name for name, *_ in calls))


def _thread_stats(pid: int) -> None:
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return
    for tid in tids:
        try:
            with open(f"{base}/{tid}/stat", "rb") as fh:
                fh.read()
        except OSError:
            pass


def _read(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.read(fd, 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def host_floor(pids: Sequence[int], scan_threads_of: Sequence[int] | None = None) -> Callable[[], None]:
    """The host source's reads for ``pids``, bare: per process its stat, io and wchan files, each thread's
    stat file for the processes in ``scan_threads_of`` (default all: the tick scans those over a quarter of
    a core), the machine's per-CPU times, memory and load average."""
    scanned = list(pids if scan_threads_of is None else scan_threads_of)

    def floor() -> None:
        for pid in pids:
            _read(f"/proc/{pid}/stat")
            _read(f"/proc/{pid}/io")
            _read(f"/proc/{pid}/wchan")
        for pid in scanned:
            _thread_stats(pid)
        psutil.cpu_times(percpu=True)
        psutil.virtual_memory()
        os.getloadavg()

    return floor
