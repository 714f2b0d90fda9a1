"""The process lists and per-process utilisation in one NVML call each, where pynvml's wrappers make two.

pynvml's ``nvmlDeviceGetComputeRunningProcesses_v3`` (and the graphics one, and
``nvmlDeviceGetProcessUtilization``) first call NVML with no buffer to learn the count, then allocate and
call again; the driver does its work both times (the compute list: 47 µs of native time per tick for the
two on the H200; per-process utilisation ~1.5 ms an ask), and pynvml then turns each entry into a
"friendly" Python object. Here each reader keeps its buffer between calls, sized with pynvml's own margin
(twice NVML's count plus 5): one call while it fits; when NVML answers InsufficientSize it has set the count,
and the buffer grows for the call made again, as pynvml's second call would be. Entries are unpacked from
the buffer's bytes in one pass.

Fails safe: this needs the real pynvml's function lookup (``_nvmlGetFunctionPointer``) and its ctypes
structures; without them (a binding that lacks them, a driver without the symbol) the caller gets pynvml's
function. NVML's answers are raised as pynvml raises them (``NVMLError(code)``), so the caller's error
handling is unchanged, except the two a wrong call of ours could cause (InvalidArgument, InsufficientSize
after the buffer grew): those are checked against pynvml's own function at once, and if that answers, the
direct path is given up for good and its answer used.
"""

from __future__ import annotations

import ctypes
import logging
import struct
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: Entries a buffer starts with (a GPU with 16 processes fits at once; more grow it once).
START_ENTRIES = 16
#: A process list entry: (pid, used GPU memory in bytes, or None where NVML cannot tell).
Entry = tuple[int, int | None]
#: A per-process utilisation sample: (pid, timestamp µs, SM %, memory %).
Sample = tuple[int, int, int, int]


def _lookup(nvml: Any, symbol: str) -> Any:
    get = getattr(nvml, "_nvmlGetFunctionPointer", None)
    if get is None:
        return None
    try:
        return get(symbol)
    except Exception:  # FunctionNotFound (older driver), Uninitialized ...: pynvml's function decides
        return None


def _record(ctype: Any, names: tuple[str, ...]) -> struct.Struct | None:
    """A Struct reading ``names`` (unsigned 4- or 8-byte fields) out of one ``ctype`` entry; None where the
    layout is not what that expects."""
    try:
        fields = [getattr(ctype, n) for n in names]
        size = ctypes.sizeof(ctype)
    except (AttributeError, TypeError):
        return None
    fmt, at = "=", 0
    for f in sorted(fields, key=lambda f: f.offset):
        if f.size not in (4, 8) or f.offset < at:
            return None
        fmt += f"{f.offset - at}x" + ("I" if f.size == 4 else "Q")
        at = f.offset + f.size
    if names != tuple(n for n, f in sorted(zip(names, fields, strict=True), key=lambda p: p[1].offset)):
        return None  # the fields are unpacked in the order named
    return struct.Struct(fmt + f"{size - at}x")


class _OneCall:
    """Shared by the readers: the C function, its buffer, pynvml's function to check errors against."""

    def __init__(self, nvml: Any, fn: Any, ctype: Any, record: struct.Struct, slow: Callable[..., Any]) -> None:
        self.nvml, self.fn, self.ctype, self.record, self.slow = nvml, fn, ctype, record, slow
        self.ok, self.too_small = nvml.NVML_SUCCESS, nvml.NVML_ERROR_INSUFFICIENT_SIZE
        self.suspect = frozenset({self.too_small, nvml.NVML_ERROR_INVALID_ARGUMENT})
        self.buf = (ctype * START_ENTRIES)()
        self.on = True

    def _grow(self, needed: int) -> None:
        self.buf = (self.ctype * (max(needed, len(self.buf)) * 2 + 5))()

    def _bytes(self, n: int) -> bytes:
        return ctypes.string_at(self.buf, n * self.record.size)

    def _failed(self, ret: int, *args: Any) -> Any:
        """The direct call answered ``ret``: raise it as pynvml would; one our call may have caused is asked
        of pynvml's function first, and the direct path given up if that one answers."""
        if ret not in self.suspect:
            raise self.nvml.NVMLError(ret)
        answer = self.slow(*args)  # raises as pynvml always did when the driver really refuses
        log.info("NVML answered %d to a direct call that pynvml's function answers; using pynvml's from now on",
                 ret)
        self.on = False
        return answer


class ProcessList(_OneCall):
    """``fn(handle)`` -> [(pid, used bytes or None)] from ``nvmlDevice*RunningProcesses_v3``."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.not_available = self.nvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value

    def __call__(self, handle: Any) -> list[Entry]:
        if not self.on:
            return self.slow(handle)
        count = ctypes.c_uint(len(self.buf))
        ret = self.fn(handle, ctypes.byref(count), self.buf)
        if ret == self.too_small:
            self._grow(count.value)
            count.value = len(self.buf)
            ret = self.fn(handle, ctypes.byref(count), self.buf)
        if ret != self.ok:
            return self._failed(ret, handle)
        n = min(count.value, len(self.buf))
        na = self.not_available
        return [(pid, None if used == na else used) for pid, used in self.record.iter_unpack(self._bytes(n))]


class Utilisation(_OneCall):
    """``fn(handle, since_us)`` -> [(pid, timestamp, sm %, mem %)] from ``nvmlDeviceGetProcessUtilization``."""

    def __call__(self, handle: Any, since_us: int) -> list[Sample]:
        if not self.on:
            return self.slow(handle, since_us)
        since = ctypes.c_ulonglong(since_us)
        count = ctypes.c_uint(len(self.buf))
        ret = self.fn(handle, self.buf, ctypes.byref(count), since)
        if ret == self.too_small:
            self._grow(count.value)
            count.value = len(self.buf)
            ret = self.fn(handle, self.buf, ctypes.byref(count), since)
        if ret != self.ok:
            return self._failed(ret, handle, since_us)
        n = min(count.value, len(self.buf))
        return list(self.record.iter_unpack(self._bytes(n)))


def pynvml_list(nvml: Any, name: str) -> Callable[[Any], list[Entry]]:
    """pynvml's list function ``name``, its entries as pairs."""
    fn = getattr(nvml, name)

    def entries(handle: Any) -> list[Entry]:
        return [(int(p.pid), p.usedGpuMemory) for p in fn(handle)]

    return entries


def _pynvml_samples(fn: Callable[[Any, int], Any]) -> Callable[[Any, int], list[Sample]]:
    get = object.__getattribute__  # past pynvml's per-field hook: a quarter of the cost per read

    def samples(handle: Any, since_us: int) -> list[Sample]:
        return [(get(s, "pid"), get(s, "timeStamp"), get(s, "smUtil"), get(s, "memUtil"))
                for s in fn(handle, since_us)]

    return samples


def _direct(nvml: Any, cls: Callable[..., Callable[..., Any]], symbol: str, ctype_name: str, names: tuple[str, ...],
            slow: Callable[..., Any]) -> Callable[..., Any]:
    """``cls`` over the C function ``symbol`` and its entry type ``ctype_name``; ``slow`` (pynvml's) where
    either cannot be had or the entry's layout is not the one expected."""
    ctype = getattr(nvml, ctype_name, None)
    fn = _lookup(nvml, symbol)
    record = _record(ctype, names) if ctype is not None else None
    return slow if fn is None or record is None else cls(nvml, fn, ctype, record, slow)


def process_list(nvml: Any, name: str) -> Callable[[Any], list[Entry]]:
    """The list function for ``name`` (``nvmlDeviceGetComputeRunningProcesses``...): the direct one, else
    pynvml's (its entries as pairs)."""
    return _direct(nvml, ProcessList, f"{name}_v3", "c_nvmlProcessInfo_v3_t", ("pid", "usedGpuMemory"),
                   pynvml_list(nvml, name))


def utilisation(nvml: Any) -> Callable[[Any, int], list[Sample]]:
    """``nvmlDeviceGetProcessUtilization`` as samples: the direct one, else pynvml's."""
    return _direct(nvml, Utilisation, "nvmlDeviceGetProcessUtilization", "c_nvmlProcessUtilizationSample_t",
                   ("pid", "timeStamp", "smUtil", "memUtil"),
                   _pynvml_samples(nvml.nvmlDeviceGetProcessUtilization))
