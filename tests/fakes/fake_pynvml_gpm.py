"""GPM for the fake pynvml: sample pointers that fit the real ctypes structures, and metrics from a pair.

A sample records the GPU's ``gpm`` values when taken. ``nvmlGpmMetricsGet`` reports the mean of the
values recorded by every sample taken on that GPU after the older and up to the newer one: the activity
over the interval, so a reader that never swaps its pair averages over ever longer windows and reads
wrong. A misused pair (out of order, two GPUs, never taken) gets NVML_ERROR_INVALID_ARGUMENT on every
metric, so a reader that passes its samples the wrong way round reads None, not numbers.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Any

import pynvml as _real

from .fake_pynvml_gpu import FakeGpu, FakeHandle, nvml_function


@dataclass
class _GpmSampleState:
    gpu: int | None = None
    seq: int = 0
    values: dict[int, float] = field(default_factory=dict)


class FakeGpmMixin:
    """The GPM functions of :class:`fakes.fake_pynvml.FakeNvml`."""

    gpus: list[FakeGpu]

    def _init_gpm(self) -> None:
        #: address -> state of every allocated, not yet freed sample
        self.gpm_live: dict[int, _GpmSampleState] = {}
        self._gpm_buffers: dict[int, ctypes.c_int] = {}
        self._gpm_seq = 0
        #: GPU index -> the latest (seq, values) of each sample taken on it
        self._gpm_history: dict[int, list[tuple[int, dict[int, float]]]] = {}
        self._gpm_lock = threading.Lock()

    def _enter(self, name: str, symbol: str, versioned: str | None, handle: Any) -> None:
        raise NotImplementedError

    @nvml_function()
    def nvmlGpmQueryDeviceSupport(self, device: FakeHandle) -> Any:
        support = _real.c_nvmlGpmSupport_t()
        support.version = _real.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(self._gpu(device).gpm_supported)
        return support

    @nvml_function()
    def nvmlGpmSampleAlloc(self) -> Any:
        """A real ``c_nvmlGpmSample_t`` pointer with a distinct address, so it fits the real structures."""
        buf = ctypes.c_int(0)
        ptr = ctypes.cast(ctypes.pointer(buf), _real.c_nvmlGpmSample_t)
        address = _address(ptr)
        assert address is not None
        self._gpm_buffers[address] = buf
        self.gpm_live[address] = _GpmSampleState()
        return ptr

    @nvml_function()
    def nvmlGpmSampleFree(self, gpmSample: Any) -> None:
        address = _address(gpmSample)
        if address not in self.gpm_live:
            raise _real.NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        del self.gpm_live[address]
        del self._gpm_buffers[address]

    @nvml_function()
    def nvmlGpmSampleGet(self, device: FakeHandle, gpmSample: Any) -> Any:
        state = self.gpm_live.get(_address(gpmSample) or 0)
        if state is None:
            raise _real.NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        g = self._gpu(device)
        if not g.gpm_supported:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        with self._gpm_lock:
            self._gpm_seq += 1
            state.gpu, state.seq, state.values = device.index, self._gpm_seq, dict(g.gpm)
            history = self._gpm_history.setdefault(device.index, [])
            history.append((state.seq, state.values))
            del history[:-64]
        return gpmSample

    @nvml_function()
    def nvmlGpmMetricsGet(self, metricsGet: Any) -> Any:
        """Metric = mean over the samples in (older, newer]; a pair out of order, from two GPUs or with a
        sample never taken gives every metric NVML_ERROR_INVALID_ARGUMENT, as a misuse would."""
        if metricsGet.version != _real.NVML_GPM_METRICS_GET_VERSION:
            raise _real.NVMLError(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        s1 = self.gpm_live.get(_address(metricsGet.sample1) or 0)
        s2 = self.gpm_live.get(_address(metricsGet.sample2) or 0)
        valid = s1 is not None and s2 is not None and s1.gpu is not None and s1.gpu == s2.gpu and s1.seq < s2.seq
        errors: dict[int, int] = {}
        window: list[dict[int, float]] = []
        if valid and s1 is not None and s2 is not None and s2.gpu is not None:
            errors = self.gpus[s2.gpu].gpm_errors
            window = [v for seq, v in self._gpm_history.get(s2.gpu, []) if s1.seq < seq <= s2.seq] or [s2.values]
        for i in range(metricsGet.numMetrics):
            m = metricsGet.metrics[i]
            found = [v[m.metricId] for v in window if m.metricId in v]
            value = sum(found) / len(found) if found else None
            if not valid:
                m.nvmlReturn, m.value = _real.NVML_ERROR_INVALID_ARGUMENT, 0.0
            elif m.metricId in errors:
                m.nvmlReturn, m.value = errors[m.metricId], 0.0
            elif value is None:
                m.nvmlReturn, m.value = _real.NVML_ERROR_NOT_SUPPORTED, 0.0
            else:
                m.nvmlReturn, m.value = _real.NVML_SUCCESS, float(value)
        return metricsGet


def _address(ptr: Any) -> int | None:
    return ctypes.cast(ptr, ctypes.c_void_p).value
