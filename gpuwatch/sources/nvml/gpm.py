"""GPM (GPU Performance Monitoring, Hopper and newer): SM activity, occupancy, tensor, DRAM, FP pipes, PCIe.

GPM metrics come from a pair of samples more than 100 ms apart. A blocking reader would sleep between
them; this one keeps a rolling pair instead, so no tick ever sleeps: two samples are allocated once per
GPU, one is taken at start, and each tick takes the newer one, computes the metrics against the older,
then swaps them. A tick that comes too soon after the last sample reuses the last metrics.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from gpuwatch.model.snapshot import MIB, Profiling
from gpuwatch.sources.nvml.device import Device, once

#: GPM needs more than this many seconds between the two samples of a pair (nvml.h).
MIN_GAP_S = 0.1

_set = object.__setattr__

#: Profiling field -> (pynvml metric constant, factor to the model's unit). GPM utilisations are
#: percent already; PCIe rates are MiB/s.
METRICS: tuple[tuple[str, str, float], ...] = (
    ("sm_active", "NVML_GPM_METRIC_SM_UTIL", 1.0),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY", 1.0),
    ("tensor_active", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", 1.0),
    ("dram_active", "NVML_GPM_METRIC_DRAM_BW_UTIL", 1.0),
    ("graphics_active", "NVML_GPM_METRIC_GRAPHICS_UTIL", 1.0),
    ("fp64_active", "NVML_GPM_METRIC_FP64_UTIL", 1.0),
    ("fp32_active", "NVML_GPM_METRIC_FP32_UTIL", 1.0),
    ("fp16_active", "NVML_GPM_METRIC_FP16_UTIL", 1.0),
    ("pcie_tx_bytes_s", "NVML_GPM_METRIC_PCIE_TX_PER_SEC", float(MIB)),
    ("pcie_rx_bytes_s", "NVML_GPM_METRIC_PCIE_RX_PER_SEC", float(MIB)),
)


def _results_unpacker(nvml: Any, mg: Any, count: int) -> struct.Struct | None:
    """A Struct that reads (nvmlReturn, value) of the first ``count`` metrics out of pynvml's ctypes
    structure in one call: pynvml's per-field attribute hook costs ~1 µs a read, 20 reads a tick per GPU.
    None where the structure is not a ctypes one (then the attributes are read)."""
    metric = getattr(nvml, "c_nvmlGpmMetric_t", None)
    if not isinstance(mg, ctypes.Structure) or metric is None:
        return None
    try:
        base, stride = type(mg).metrics.offset, ctypes.sizeof(metric)
        ret_at, value_at = metric.nvmlReturn.offset, metric.value.offset
        sizes = (metric.nvmlReturn.size, metric.value.size)
    except AttributeError:
        return None
    if sizes != (4, 8) or value_at < ret_at + 4:
        return None
    gap, tail = value_at - ret_at - 4, stride - (value_at + 8) + ret_at
    one = f"I{gap}xd"
    return struct.Struct("=" + f"{base + ret_at}x" + f"{tail}x".join([one] * count))


class GpmReader:
    """The rolling GPM sample pair of one GPU. ``active`` is False where GPM is not supported."""

    def __init__(self, nvml: Any, device: Device, now: float) -> None:
        self.nvml = nvml
        self.device = device
        self.active = False
        self.last: Profiling | None = None
        self.prev: Any = None
        self.cur: Any = None
        self.prev_t: float | None = None
        self._get = once("gpm_sample", nvml.nvmlGpmSampleGet)
        self._fields = [(name, scale) for name, _, scale in METRICS]
        self.start(now)

    def start(self, now: float) -> None:
        """Check support, allocate the pair, take the first sample. Any failure leaves GPM off."""
        nvml = self.nvml
        support = self.device.call(once("gpm_support", nvml.nvmlGpmQueryDeviceSupport))
        if support is None or not support.isSupportedDevice:
            return
        try:
            self.prev = nvml.nvmlGpmSampleAlloc()
            self.cur = nvml.nvmlGpmSampleAlloc()
        except self.device.catch:
            self.close()
            return
        mg = nvml.c_nvmlGpmMetricsGet_t()
        mg.version = nvml.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(METRICS)
        for i, (_, const, _) in enumerate(METRICS):
            mg.metrics[i].metricId = getattr(nvml, const)
        self._mg = mg  # reused every tick: no per-tick allocation of the 477-slot structure
        self._unpack = _results_unpacker(nvml, mg, len(METRICS))
        self.active = True
        self.last, self.prev_t = None, None
        self._get.off = None
        self._get.args = (self.prev,)
        if self.device.call(self._get) is not None:
            self.prev_t = now
        elif self._get.off is not None:
            self.close()

    def read(self, now: float) -> Profiling | None:
        """This tick's GPM metrics; the last ones when the previous sample is under 100 ms old."""
        if not self.active:
            return None
        if self.prev_t is not None and now - self.prev_t <= MIN_GAP_S:
            return self.last
        self._get.args = (self.cur,)
        if self.device.call(self._get) is None:
            if self._get.off is not None:  # NotSupported after all (e.g. MIG turned on): stop using GPM
                self.close()
            self.last = None
            return None
        if self.prev_t is None:  # the first sample failed earlier: this one starts the pair
            self.last = None
        else:
            self.last = self._compute()
        self.prev, self.cur = self.cur, self.prev
        self.prev_t = now
        return self.last

    def _compute(self) -> Profiling | None:
        mg = self._mg
        # older, newer; set past pynvml's Python-level __setattr__ hook (it only re-encodes str values)
        _set(mg, "sample1", self.prev)
        _set(mg, "sample2", self.cur)
        try:
            self.nvml.nvmlGpmMetricsGet(mg)
        except self.device.catch as exc:
            self.device.policy.raise_for_backend(exc)
            return None
        ok = self.nvml.NVML_SUCCESS
        if self._unpack is not None:
            flat = self._unpack.unpack_from(mg)  # (return, value) per metric, read straight from the struct
            results = [(flat[2 * i], flat[2 * i + 1]) for i in range(len(self._fields))]
        else:
            results = [(m.nvmlReturn, m.value) for m in (mg.metrics[i] for i in range(len(self._fields)))]
        values: dict[str, float | None] = {}
        for (name, scale), (ret, value) in zip(self._fields, results, strict=True):
            values[name] = round(value * scale, 2) if ret == ok else None
        return Profiling(**values)

    def close(self) -> None:
        """Free the pair (before nvmlShutdown); safe to call twice."""
        self.active = False
        for sample in (self.prev, self.cur):
            if sample is not None:
                try:
                    self.nvml.nvmlGpmSampleFree(sample)
                except self.device.catch:
                    pass
        self.prev = self.cur = None
