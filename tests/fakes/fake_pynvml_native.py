"""The C functions of the fake pynvml: ``_nvmlGetFunctionPointer(symbol)``, as gpuwatch calls the process
lists and per-process utilisation in one driver call (``gpuwatch/sources/nvml/direct.py``).

Each function takes its arguments as ctypes passes them to libnvidia-ml (a ``byref`` count, a caller's
array or None, a ``c_ulonglong`` timestamp) and answers an ``nvmlReturn_t`` code instead of raising: with no
array, or one smaller than the count, InsufficientSize and the count set to what is needed; else the array
filled and the count set. The knobs of :class:`fakes.fake_pynvml.FakeNvml` apply under the pynvml name
(``inject("nvmlDeviceGetProcessUtilization", ...)`` is the code the C function answers, ``fake.calls``
counts both kinds of call and ``last_args`` holds the arguments the pynvml function would have had, a lost
GPU answers GpuIsLost); ``driver_calls`` counts the C calls alone, by
symbol. ``fake.hide("_nvmlGetFunctionPointer")`` is a binding without the lookup.
"""

from __future__ import annotations

import ctypes
import struct
from collections import Counter
from collections.abc import Callable
from typing import Any

import pynvml as _real

from .fake_pynvml_gpu import FakeGpu, FakeHandle

#: C symbol -> (pynvml name its knobs go by, process kind it lists; None: per-process utilisation)
SYMBOLS: dict[str, tuple[str, str | None]] = {
    "nvmlDeviceGetComputeRunningProcesses_v3": ("nvmlDeviceGetComputeRunningProcesses", "compute"),
    "nvmlDeviceGetGraphicsRunningProcesses_v3": ("nvmlDeviceGetGraphicsRunningProcesses", "graphics"),
    "nvmlDeviceGetProcessUtilization": ("nvmlDeviceGetProcessUtilization", None),
}


class FakeNativeMixin:
    """``_nvmlGetFunctionPointer`` of :class:`fakes.fake_pynvml.FakeNvml`."""

    gpus: list[FakeGpu]
    missing: set[str]
    calls: Counter[str]
    last_args: dict[str, tuple[Any, ...]]
    now_us: Callable[[], int]

    def _init_native(self) -> None:
        #: C symbol -> calls made through the function pointer
        self.driver_calls: Counter[str] = Counter()

    def _enter(self, name: str, symbol: str, versioned: str | None, handle: Any) -> None:
        raise NotImplementedError

    def _nvmlGetFunctionPointer(self, name: str) -> Callable[..., int]:
        if name not in SYMBOLS or name in self.missing:
            raise _real.NVMLError(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        pynvml_name, kind = SYMBOLS[name]

        def gate(handle: Any, *args: Any) -> int:
            """Counts and knobs; ``last_args`` as the pynvml function would have had them."""
            self.driver_calls[name] += 1
            self.last_args[pynvml_name] = (handle, *args)
            try:
                self._enter(pynvml_name, name, None, handle)
            except _real.NVMLError as exc:
                return int(exc.value)
            return _real.NVML_SUCCESS

        if kind is None:
            def utilization(handle: FakeHandle, samples: Any, count_ref: Any, since: Any) -> int:
                ret = gate(handle, since.value)
                if ret != _real.NVML_SUCCESS:
                    return ret
                now = self.now_us()
                busy = [p for p in self.gpus[handle.index].processes if (p.sm_util or p.mem_util)]
                if not busy or now <= since.value:
                    return _real.NVML_ERROR_NOT_FOUND
                count = count_ref._obj
                if samples is None or count.value < len(busy):
                    count.value = len(busy)
                    return _real.NVML_ERROR_INSUFFICIENT_SIZE
                _fill(samples, [(p.pid, now, p.sm_util, p.mem_util, 0, 0) for p in busy])
                count.value = len(busy)
                return _real.NVML_SUCCESS

            return utilization

        def running(handle: FakeHandle, count_ref: Any, infos: Any) -> int:
            ret = gate(handle)
            if ret != _real.NVML_SUCCESS:
                return ret
            procs = [p for p in self.gpus[handle.index].processes if kind in p.kind]
            count = count_ref._obj
            if infos is None or count.value < len(procs):
                count.value = len(procs)
                return _real.NVML_ERROR_INSUFFICIENT_SIZE if procs else _real.NVML_SUCCESS
            na = _real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
            _fill(infos, [(p.pid, na if p.used_memory is None else p.used_memory, 0xFFFFFFFF, 0xFFFFFFFF)
                          for p in procs])
            count.value = len(procs)
            return _real.NVML_SUCCESS

        return running


def _fill(array: Any, entries: list[tuple[int, ...]]) -> None:
    """Write ``entries`` (each the structure's fields in order) into the caller's ctypes array as the driver
    would: straight into its memory, past pynvml's per-field Python hook that a C function never meets."""
    packer = _packer(array._type_)
    for i, entry in enumerate(entries):
        packer.pack_into(array, i * packer.size, *entry)


_PACKERS: dict[Any, struct.Struct] = {}


def _packer(ctype: Any) -> struct.Struct:
    """A Struct with the layout of ``ctype`` (unsigned 4- and 8-byte fields)."""
    packer = _PACKERS.get(ctype)
    if packer is None:
        fmt, at = "=", 0
        for name, _ in ctype._fields_:
            field = getattr(ctype, name)
            fmt += f"{field.offset - at}x" + ("I" if field.size == 4 else "Q")
            at = field.offset + field.size
        packer = _PACKERS[ctype] = struct.Struct(fmt + f"{ctypes.sizeof(ctype) - at}x")
    return packer
