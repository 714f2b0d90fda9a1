"""The catalogue of named metrics: one place that says what ``gpu.sm_active`` is, in which unit, how to read
it from a Snapshot, and what it is called on /metrics (:mod:`gpuwatch.model.series` adds the series that
are not a reading of one value, and lists everything /metrics serves).

Alert rules, the doctor, the exporter and the TUI all name metrics by these keys, so a rule's
``metric: gpu.sm_occupancy`` and the exporter's ``gpuwatch_gpu_sm_occupancy_ratio`` cannot drift apart.
The dashboard reads a spec's ``label``, its ratio (``fraction``) and its colour levels (``levels``) here
rather than computing its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample
from gpuwatch.model.spelling import close_matches

Scope = Literal["gpu", "process", "host"]
#: How Prometheus should read a series; a counter's name ends in ``_total``.
Kind = Literal["gauge", "counter", "histogram"]
Level = Literal["ok", "warning", "critical"]
#: How a value of each unit is written where the spec says nothing else.
UNIT_FORMATS = {"percent": "{:.0f}%", "celsius": "{:.0f}°C", "watts": "{:.0f} W", "MHz": "{:.0f} MHz"}
MISSING = "–"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    key: str
    scope: Scope
    unit: str
    help: str
    read: Callable[..., float | None]
    #: Prometheus metric name served by the exporter (base units), and the factor from ``unit`` to it.
    prom_name: str | None = None
    prom_scale: float = 1.0
    kind: Kind = "gauge"
    #: The value is a rate (``unit`` per second): /metrics serves its running total as a counter, and
    #: Prometheus reads the rate back with ``rate()``.
    integrated: bool = False
    #: How the dashboard names it ("" where the dashboard does not show it by itself).
    label: str = ""
    #: (warning, critical) levels in ``unit``: the dashboard colours a value at or above each.
    levels: tuple[float, float] | None = None
    #: How the dashboard writes a value (a ``str.format`` pattern with its unit's symbol); "" follows the unit.
    fmt: str = ""

    def text(self, value: float | None) -> str:
        """``value`` as the dashboard writes it (``62%``, ``71°C``), or a dash when it is unknown."""
        if value is None:
            return MISSING
        return (self.fmt or UNIT_FORMATS.get(self.unit, "{:g}")).format(value)

    def level(self, value: float | None) -> Level | None:
        """Where ``value`` stands against :attr:`levels` (None: unknown value, or no levels)."""
        if value is None or self.levels is None:
            return None
        return "critical" if value >= self.levels[1] else "warning" if value >= self.levels[0] else "ok"

    def fraction(self, obj: GpuSample | ProcessSample | HostSample) -> float | None:
        """The value as a share of its whole, for a bar (a percent over 100; None: not a percent, or unknown)."""
        value = read_metric(self.key, obj) if self.unit == "percent" else None
        return None if value is None else value / 100.0


def _attr(name: str) -> Callable[[object], float | None]:
    def read(obj: object) -> float | None:
        value = getattr(obj, name)
        return None if value is None else float(value)

    read.__name__ = f"read_{name}"
    return read


def _prof(name: str) -> Callable[[GpuSample], float | None]:
    def read(gpu: GpuSample) -> float | None:
        return gpu.prof(name)

    read.__name__ = f"read_prof_{name}"
    return read


def _ratio(num: str, den: str, scale: float = 100.0) -> Callable[[object], float | None]:
    def read(obj: object) -> float | None:
        a, b = getattr(obj, num), getattr(obj, den)
        if a is None or not b:
            return None
        return scale * float(a) / float(b)

    read.__name__ = f"read_{num}_over_{den}"
    return read


def _health(name: str) -> Callable[[GpuSample], float | None]:
    def read(gpu: GpuSample) -> float | None:
        value = None if gpu.health is None else getattr(gpu.health, name)
        return None if value is None else float(value)

    read.__name__ = f"read_health_{name}"
    return read


PCT = 0.01  # percent -> ratio for Prometheus


def _byte_counter(key: str, help: str, attr: str, prom_name: str) -> MetricSpec:
    """A byte rate in the model, served on /metrics as the running total of bytes (a counter)."""
    return MetricSpec(key, key.split(".")[0], "bytes/s",  # type: ignore[arg-type]
                      f"{help}; on /metrics the bytes so far (the rate integrated over samples)", _attr(attr),
                      prom_name, kind="counter", integrated=True)

_GPU: list[MetricSpec] = [
    MetricSpec("gpu.util", "gpu", "percent", "GPU-Util: share of time any kernel ran (NVML)",
               _attr("gpu_util"), "gpuwatch_gpu_utilization_ratio", PCT, label="GPU-Util"),
    MetricSpec("gpu.mem_util", "gpu", "percent", "memory-controller busy time (NVML)",
               _attr("mem_util"), "gpuwatch_gpu_memory_controller_utilization_ratio", PCT),
    MetricSpec("gpu.mem_used_bytes", "gpu", "bytes", "device memory in use",
               _attr("mem_used_bytes"), "gpuwatch_gpu_memory_used_bytes"),
    MetricSpec("gpu.mem_total_bytes", "gpu", "bytes", "device memory size",
               _attr("mem_total_bytes"), "gpuwatch_gpu_memory_total_bytes"),
    MetricSpec("gpu.mem_used_percent", "gpu", "percent", "device memory occupied",
               _ratio("mem_used_bytes", "mem_total_bytes"), "gpuwatch_gpu_memory_used_ratio", PCT,
               label="memory", levels=(90.0, 97.0)),
    MetricSpec("gpu.temperature_c", "gpu", "celsius", "GPU temperature",
               _attr("temperature_c"), "gpuwatch_gpu_temperature_celsius", label="temp", levels=(80.0, 90.0)),
    MetricSpec("gpu.power_w", "gpu", "watts", "power draw",
               _attr("power_w"), "gpuwatch_gpu_power_watts"),
    MetricSpec("gpu.power_limit_w", "gpu", "watts", "enforced power limit",
               _attr("power_limit_w"), "gpuwatch_gpu_power_limit_watts"),
    MetricSpec("gpu.power_percent", "gpu", "percent", "power draw against the enforced limit",
               _ratio("power_w", "power_limit_w"), "gpuwatch_gpu_power_limit_usage_ratio", PCT,
               label="power", levels=(95.0, 100.0)),
    MetricSpec("gpu.sm_clock_mhz", "gpu", "MHz", "SM clock",
               _attr("sm_clock_mhz"), "gpuwatch_gpu_sm_clock_hertz", 1e6),
    MetricSpec("gpu.sm_clock_max_mhz", "gpu", "MHz", "maximum SM clock",
               _attr("sm_clock_max_mhz"), "gpuwatch_gpu_sm_clock_max_hertz", 1e6),
    MetricSpec("gpu.sm_clock_percent", "gpu", "percent", "SM clock against its maximum",
               _ratio("sm_clock_mhz", "sm_clock_max_mhz"), None, label="SM clock"),
    MetricSpec("gpu.mem_clock_mhz", "gpu", "MHz", "memory clock",
               _attr("mem_clock_mhz"), "gpuwatch_gpu_memory_clock_hertz", 1e6),
    MetricSpec("gpu.pstate", "gpu", "", "performance state (0 = fastest)",
               _attr("pstate"), "gpuwatch_gpu_performance_state"),
    MetricSpec("gpu.energy_j", "gpu", "joules", "energy since the driver loaded",
               _attr("energy_j"), "gpuwatch_gpu_energy_joules_total", kind="counter"),
    _byte_counter("gpu.pcie_tx_bytes_s", "PCIe transmit rate (GPM, DCGM or NVML)", "pcie_tx_rate",
                  "gpuwatch_gpu_pcie_transmit_bytes_total"),
    _byte_counter("gpu.pcie_rx_bytes_s", "PCIe receive rate: host-to-device copies", "pcie_rx_rate",
                  "gpuwatch_gpu_pcie_receive_bytes_total"),
    MetricSpec("gpu.mem_reserved_bytes", "gpu", "bytes", "device memory the driver reserves",
               _attr("mem_reserved_bytes"), "gpuwatch_gpu_memory_reserved_bytes"),
    MetricSpec("gpu.pcie_link_gen", "gpu", "", "current PCIe link generation",
               _attr("pcie_link_gen"), "gpuwatch_gpu_pcie_link_generation"),
    MetricSpec("gpu.pcie_link_width", "gpu", "lanes", "current PCIe link width",
               _attr("pcie_link_width"), "gpuwatch_gpu_pcie_link_width"),
    MetricSpec("gpu.mig_mode", "gpu", "", "1 when MIG mode is on", _attr("mig_mode"), "gpuwatch_gpu_mig_mode_enabled"),
    MetricSpec("gpu.lost", "gpu", "", "1 once the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST); no longer polled",
               _attr("lost"), "gpuwatch_gpu_lost"),
    MetricSpec("gpu.ecc_uncorrected", "gpu", "errors", "volatile uncorrected ECC errors",
               _attr("ecc_uncorrected"), "gpuwatch_gpu_ecc_uncorrected_errors_total", kind="counter"),
    MetricSpec("gpu.ecc_corrected", "gpu", "errors", "volatile corrected ECC errors",
               _attr("ecc_corrected"), "gpuwatch_gpu_ecc_corrected_errors_total", kind="counter"),
    MetricSpec("gpu.sm_active", "gpu", "percent", "share of SMs busy (GPM SM_UTIL or DCGM SM_ACTIVE)",
               _prof("sm_active"), "gpuwatch_gpu_sm_active_ratio", PCT, label="SM active"),
    MetricSpec("gpu.sm_occupancy", "gpu", "percent", "resident warps against the maximum (occupancy)",
               _prof("sm_occupancy"), "gpuwatch_gpu_sm_occupancy_ratio", PCT, label="SM occup."),
    MetricSpec("gpu.tensor_active", "gpu", "percent", "tensor-core pipe activity",
               _prof("tensor_active"), "gpuwatch_gpu_tensor_active_ratio", PCT, label="tensor"),
    MetricSpec("gpu.dram_active", "gpu", "percent", "DRAM bandwidth used against the theoretical peak",
               _prof("dram_active"), "gpuwatch_gpu_dram_active_ratio", PCT, label="DRAM bw"),
    MetricSpec("gpu.graphics_active", "gpu", "percent",
               "graphics/compute engine activity (GPM: the mean over 10 s; DCGM)",
               _prof("graphics_active"), "gpuwatch_gpu_graphics_active_ratio", PCT),
    MetricSpec("gpu.fp32_active", "gpu", "percent", "FP32 pipe activity",
               _prof("fp32_active"), "gpuwatch_gpu_fp32_active_ratio", PCT),
    MetricSpec("gpu.fp16_active", "gpu", "percent", "FP16 pipe activity",
               _prof("fp16_active"), "gpuwatch_gpu_fp16_active_ratio", PCT),
    MetricSpec("gpu.fp64_active", "gpu", "percent", "FP64 pipe activity",
               _prof("fp64_active"), "gpuwatch_gpu_fp64_active_ratio", PCT),
]


def _h(key: str, unit: str, help: str, prom: str, scale: float = 1.0, kind: Kind = "gauge",
       attr: str | None = None) -> MetricSpec:
    """A health metric (read every 10 s off the tick, see :mod:`gpuwatch.model.health`)."""
    return MetricSpec(f"gpu.{key}", "gpu", unit, help, _health(attr or key), prom, scale, kind)


_HEALTH: list[MetricSpec] = [
    _h("xid_errors", "errors", "XID errors since gpuwatch started watching the GPU",
       "gpuwatch_gpu_xid_errors_total", kind="counter", attr="xid_count"),
    _h("xid_last", "xid", "code of the latest XID error since gpuwatch started (like DCGM_FI_DEV_XID_ERRORS)",
       "gpuwatch_gpu_last_xid"),
    _h("xid_recent", "xid", "code of the latest XID error if it came in the last 10 minutes, else 0",
       "gpuwatch_gpu_recent_xid"),
    _h("remapped_rows_correctable", "rows", "memory rows remapped for correctable errors",
       "gpuwatch_gpu_remapped_rows_correctable_total", kind="counter"),
    _h("remapped_rows_uncorrectable", "rows", "memory rows remapped for uncorrectable errors",
       "gpuwatch_gpu_remapped_rows_uncorrectable_total", kind="counter"),
    _h("row_remap_pending", "", "1 while a row remap waits for a GPU reset", "gpuwatch_gpu_row_remap_pending"),
    _h("row_remap_failure", "", "1 once a row remap failed (the GPU needs service)", "gpuwatch_gpu_row_remap_failure"),
    _h("pcie_replays", "replays", "PCIe link retransmissions since the driver loaded",
       "gpuwatch_gpu_pcie_replays_total", kind="counter"),
    _h("memory_temperature_c", "celsius", "memory (HBM) temperature", "gpuwatch_gpu_memory_temperature_celsius"),
    _h("fan_speed_percent", "percent", "fan speed against its maximum", "gpuwatch_gpu_fan_speed_ratio", PCT),
    _h("encoder_util", "percent", "video encoder (NVENC) utilisation", "gpuwatch_gpu_encoder_utilization_ratio", PCT),
    _h("decoder_util", "percent", "video decoder (NVDEC) utilisation", "gpuwatch_gpu_decoder_utilization_ratio", PCT),
    _h("nvlink_links", "links", "NVLink links the GPU has", "gpuwatch_gpu_nvlink_links"),
    _h("nvlink_links_up", "links", "NVLink links up", "gpuwatch_gpu_nvlink_links_up"),
    _h("nvlink_tx_bytes", "bytes", "bytes sent over NVLink, all links", "gpuwatch_gpu_nvlink_transmit_bytes_total",
       kind="counter"),
    _h("nvlink_rx_bytes", "bytes", "bytes received over NVLink, all links", "gpuwatch_gpu_nvlink_receive_bytes_total",
       kind="counter"),
]

_PROCESS: list[MetricSpec] = [
    MetricSpec("process.gpu_memory_bytes", "process", "bytes", "device memory held by the process",
               _attr("gpu_memory_bytes"), "gpuwatch_process_gpu_memory_bytes"),
    MetricSpec("process.sm_util", "process", "percent", "the process's share of SM time (NVML)",
               _attr("sm_util"), "gpuwatch_process_sm_utilization_ratio", PCT),
    MetricSpec("process.mem_util", "process", "percent", "the process's share of memory-controller time",
               _attr("mem_util"), "gpuwatch_process_memory_controller_utilization_ratio", PCT),
    MetricSpec("process.cpu_percent", "process", "percent",
               "CPU of the whole process (a whole core: 100 in percent, 1.0 as a ratio)",
               _attr("cpu_percent"), "gpuwatch_process_cpu_usage_ratio", PCT),
    MetricSpec("process.top_thread_cpu_percent", "process", "percent",
               "CPU of the busiest thread (a whole core, a GIL-bound loop: 100 in percent, 1.0 as a ratio)",
               _attr("top_thread_cpu_percent"), "gpuwatch_process_top_thread_cpu_usage_ratio", PCT),
    MetricSpec("process.rss_bytes", "process", "bytes", "resident host memory",
               _attr("rss_bytes"), "gpuwatch_process_resident_memory_bytes"),
    _byte_counter("process.io_read_bytes_s", "storage read rate", "io_read_bytes_s",
                  "gpuwatch_process_io_read_bytes_total"),
    _byte_counter("process.io_write_bytes_s", "storage write rate", "io_write_bytes_s",
                  "gpuwatch_process_io_write_bytes_total"),
    MetricSpec("process.threads_in_io_wait", "process", "threads", "threads in uninterruptible sleep (D)",
               _attr("threads_in_io_wait"), "gpuwatch_process_threads_io_wait"),
    MetricSpec("process.cpu_limit_cores", "process", "cores",
               "cores the process may use where fewer than the host's (its cgroup's CPU quota or its CPU affinity)",
               _attr("cpu_limit_cores"), "gpuwatch_process_cpu_limit_cores"),
    MetricSpec("process.cpu_throttled_percent", "process", "percent",
               "share of its cgroup's CPU quota periods in which the quota ran out and the process was stopped",
               _attr("cpu_throttled_percent"), "gpuwatch_process_cpu_throttled_ratio", PCT),
]

_HOST: list[MetricSpec] = [
    MetricSpec("host.cpu_percent", "host", "percent", "CPU busy across all cores",
               _attr("cpu_percent"), "gpuwatch_host_cpu_usage_ratio", PCT),
    MetricSpec("host.iowait_percent", "host", "percent", "CPU time waiting on IO",
               _attr("iowait_percent"), "gpuwatch_host_cpu_iowait_ratio", PCT),
    MetricSpec("host.load1", "host", "", "1-minute load average", _attr("load1"), "gpuwatch_host_load1"),
    MetricSpec("host.load5", "host", "", "5-minute load average", _attr("load5"), "gpuwatch_host_load5"),
    MetricSpec("host.load15", "host", "", "15-minute load average", _attr("load15"), "gpuwatch_host_load15"),
    MetricSpec("host.cpu_count", "host", "CPUs", "logical CPUs", _attr("cpu_count"), "gpuwatch_host_cpus"),
    MetricSpec("host.mem_used_percent", "host", "percent", "host memory in use",
               _ratio("mem_used_bytes", "mem_total_bytes"), "gpuwatch_host_memory_used_ratio", PCT),
    MetricSpec("host.mem_used_bytes", "host", "bytes", "host memory in use",
               _attr("mem_used_bytes"), "gpuwatch_host_memory_used_bytes"),
    MetricSpec("host.mem_total_bytes", "host", "bytes", "host memory size",
               _attr("mem_total_bytes"), "gpuwatch_host_memory_total_bytes"),
    MetricSpec("host.mem_available_bytes", "host", "bytes", "host memory available to new work",
               _attr("mem_available_bytes"), "gpuwatch_host_memory_available_bytes"),
]

METRICS: dict[str, MetricSpec] = {m.key: m for m in (*_GPU, *_HEALTH, *_PROCESS, *_HOST)}


def metric(key: str) -> MetricSpec:
    """The spec for ``key``; KeyError lists the nearest known keys."""
    try:
        return METRICS[key]
    except KeyError:
        near = close_matches(key, METRICS, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise KeyError(f"unknown metric '{key}'{hint}") from None


def read_metric(key: str, obj: GpuSample | ProcessSample | HostSample) -> float | None:
    return as_value(METRICS[key].read(obj))


def as_value(value: float | int | None) -> float | None:
    """A metric's raw reading as the float it means, None for missing (NaN counts as missing)."""
    if value is None or value != value:
        return None
    return float(value)
