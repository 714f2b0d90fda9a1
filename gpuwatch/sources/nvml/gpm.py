"""GPM (GPU Performance Monitoring, Hopper and newer): SM activity, occupancy, tensor, DRAM, FP pipes, PCIe.

GPM metrics come from a pair of samples more than 100 ms apart. A blocking reader would sleep between
them; this one keeps a rolling pair instead, so no tick ever sleeps: samples are allocated once per GPU,
one is taken at start, and each tick takes a newer one and computes the metrics against the one before.
A tick that comes too soon after the last sample reuses the last metrics.

One metric is not worth its price every tick: NVML computes GRAPHICS_UTIL in about 0.8 ms of CPU on an
H200 (driver r580), where the other nine together take about 1 µs (both measured there). Graphics-engine
activity is exported but read by neither the doctor nor the dashboard, so it is computed against an
older third sample, the *anchor*, every ``SLOW_EVERY_S``: an average over that span, as a scraper that
comes every 15 s would want it anyway.
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


#: Metrics computed against the anchor, every SLOW_EVERY_S, instead of every tick.
SLOW_METRICS = frozenset({"graphics_active"})
SLOW_EVERY_S = 10.0


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


class _Request:
    """One reusable ``c_nvmlGpmMetricsGet_t`` for a fixed list of metrics, and how to read its answers."""

    def __init__(self, nvml: Any, metrics: list[tuple[str, str, float]]) -> None:
        mg = nvml.c_nvmlGpmMetricsGet_t()  # reused every tick: no per-tick allocation of the 477-slot structure
        mg.version = nvml.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(metrics)
        for i, (_, const, _) in enumerate(metrics):
            mg.metrics[i].metricId = getattr(nvml, const)
        self.mg = mg
        self.fields = [(name, scale) for name, _, scale in metrics]
        self.unpack = _results_unpacker(nvml, mg, len(metrics))
        self.ok = nvml.NVML_SUCCESS

    def results(self) -> dict[str, float | None]:
        n = len(self.fields)
        if self.unpack is not None:
            flat = self.unpack.unpack_from(self.mg)  # (return, value) per metric, read straight from the struct
            rets, values = flat[0::2], flat[1::2]
        else:
            metrics = [self.mg.metrics[i] for i in range(n)]
            rets, values = tuple(m.nvmlReturn for m in metrics), tuple(m.value for m in metrics)
        ok = self.ok
        return {name: round(value * scale, 2) if ret == ok else None
                for (name, scale), ret, value in zip(self.fields, rets, values, strict=True)}


class GpmReader:
    """The rolling GPM samples of one GPU. ``active`` is False where GPM is not supported."""

    def __init__(self, nvml: Any, device: Device, now: float) -> None:
        self.nvml = nvml
        self.device = device
        self.active = False
        self.last: Profiling | None = None
        self.samples: list[Any] = []
        self.prev: Any = None  # the newest sample taken
        self.anchor: Any = None  # the sample the slow metrics are computed from
        self.prev_t: float | None = None
        self.anchor_t: float | None = None
        self._slow_values: dict[str, float | None] = {}
        self._get = once("gpm_sample", nvml.nvmlGpmSampleGet)
        self.start(now)

    def start(self, now: float) -> None:
        """Check support, allocate the samples, take the first one. Any failure leaves GPM off."""
        nvml = self.nvml
        support = self.device.call(once("gpm_support", nvml.nvmlGpmQueryDeviceSupport))
        if support is None or not support.isSupportedDevice:
            return
        try:
            # newest, anchor and the one being taken: three roles, at most three distinct samples
            while len(self.samples) < 3:
                self.samples.append(nvml.nvmlGpmSampleAlloc())  # kept as it comes: a failure frees the rest
        except self.device.catch:
            self.close()
            return
        self._fast = _Request(nvml, [m for m in METRICS if m[0] not in SLOW_METRICS])
        self._slow = _Request(nvml, [m for m in METRICS if m[0] in SLOW_METRICS])
        self.active = True
        self.last, self.prev_t, self.anchor_t, self._slow_values = None, None, None, {}
        self._get.off = None
        self.prev = self.anchor = self.samples[0]
        self._get.args = (self.prev,)
        if self.device.call(self._get) is not None:
            self.prev_t = self.anchor_t = now
        elif self._get.off is not None:
            self.close()

    def read(self, now: float) -> Profiling | None:
        """This tick's GPM metrics; the last ones when the previous sample is under 100 ms old."""
        if not self.active:
            return None
        if self.prev_t is not None and now - self.prev_t <= MIN_GAP_S:
            return self.last
        cur = next(s for s in self.samples if s is not self.prev and s is not self.anchor)
        self._get.args = (cur,)
        if self.device.call(self._get) is None:
            if self._get.off is not None:  # NotSupported after all (e.g. MIG turned on): stop using GPM
                self.close()
            self.last = None
            return None
        if self.prev_t is None:  # the first sample failed earlier: this one starts the pair
            self.last = None
            self.anchor, self.anchor_t = cur, now
        else:
            self.last = self._compute(cur, now)
        self.prev, self.prev_t = cur, now
        return self.last

    def _compute(self, cur: Any, now: float) -> Profiling | None:
        fast = self._metrics(self._fast, self.prev, cur)
        if fast is None:
            return None
        if self.anchor_t is None or now - self.anchor_t >= SLOW_EVERY_S or not self._slow_values:
            self._slow_values = self._metrics(self._slow, self.anchor, cur) or {}
            self.anchor, self.anchor_t = cur, now
        return Profiling(**fast, **self._slow_values)

    def _metrics(self, request: _Request, older: Any, newer: Any) -> dict[str, float | None] | None:
        if not request.fields:
            return {}
        mg = request.mg
        # set past pynvml's Python-level __setattr__ hook (it only re-encodes str values)
        _set(mg, "sample1", older)
        _set(mg, "sample2", newer)
        try:
            self.nvml.nvmlGpmMetricsGet(mg)
        except self.device.catch as exc:
            self.device.policy.raise_for_backend(exc)
            return None
        return request.results()

    def close(self) -> None:
        """Free the samples (before nvmlShutdown); safe to call twice."""
        self.active = False
        for sample in self.samples:
            try:
                self.nvml.nvmlGpmSampleFree(sample)
            except self.device.catch:
                pass
        self.samples = []
        self.prev = self.anchor = None
