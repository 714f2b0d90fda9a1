"""dcgm-exporter's names for the GPU readings gpuwatch has, in dcgm-exporter's units and labels.

A fleet's dashboards (Grafana 12239 and its descendants) and alert rules are written against
dcgm-exporter's default counters: ``DCGM_FI_DEV_GPU_UTIL`` in percent, ``DCGM_FI_DEV_FB_USED`` in MiB,
clocks in MHz, energy in millijoules, ``DCGM_FI_PROF_*`` as ratios 0-1, labelled
``gpu, UUID, pci_bus_id, device, modelName, Hostname``. With ``[exporter] names = "dcgm"`` (or ``"both"``)
gpuwatch serves these series from NVML and GPM, so those dashboards and rules work on a node without DCGM.

These are the pre-4.9 names (``DCGM_FI_DEV_SM_CLOCK``, not ``..._HERTZ``): the ones published dashboards use.
The health fields (XID, remapped rows, PCIe replays, memory temperature, encoder/decoder) come from NVML's
:class:`~gpuwatch.model.health.GpuHealth`, or where a DCGM scrape filled the GPU, from the value it kept in
``extra``. dcgm-exporter types several of them ``counter`` without a ``_total`` suffix, which the Prometheus text format
of our client library cannot write; they are served as gauges (queries, ``rate()`` included, read the
name, not the type).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuwatch.model.process_sample import POD_LABELS
from gpuwatch.model.snapshot import MIB, GpuSample

#: dcgm-exporter's labels on every GPU series (it adds :data:`POD_LABELS` from the kubelet, as gpuwatch does).
DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")

Reader = Callable[[GpuSample], "float | None"]


@dataclass(frozen=True, slots=True)
class DcgmField:
    """One dcgm-exporter series: its name, the type dcgm-exporter declares, help, and how to read it."""

    name: str
    dcgm_kind: str
    help: str
    read: Reader


def _scaled(attr: str, scale: float = 1.0) -> Reader:
    def read(gpu: GpuSample) -> float | None:
        value = getattr(gpu, attr)
        return None if value is None else float(value) * scale

    return read


def _mib(attr: str) -> Reader:
    def read(gpu: GpuSample) -> float | None:
        value = getattr(gpu, attr)
        return None if value is None else float(value // MIB)  # dcgm-exporter reports whole MiB

    return read


def _fb_free(gpu: GpuSample) -> float | None:
    """Total less used less reserved: NVML's free memory, the way DCGM counts it."""
    if gpu.mem_total_bytes is None or gpu.mem_used_bytes is None:
        return None
    free = gpu.mem_total_bytes - gpu.mem_used_bytes - (gpu.mem_reserved_bytes or 0)
    return float(max(free, 0) // MIB)


def _prof_ratio(metric: str) -> Reader:
    def read(gpu: GpuSample) -> float | None:
        value = gpu.prof(metric)
        return None if value is None else value / 100.0

    return read


def _prof(metric: str) -> Reader:
    return lambda gpu: gpu.prof(metric)


def _health(attr: str, dcgm_name: str) -> Reader:
    """NVML's health value, else the one a DCGM scrape put in ``extra`` under ``dcgm_name``."""
    def read(gpu: GpuSample) -> float | None:
        value = None if gpu.health is None else getattr(gpu.health, attr)
        if value is None:
            return gpu.extra.get(dcgm_name)
        return float(value)

    return read


def _last_xid(gpu: GpuSample) -> float | None:
    """dcgm-exporter's XID_ERRORS: the last XID's code, 0 before the first."""
    h = gpu.health
    if h is None or h.xid_count is None:
        return gpu.extra.get("DCGM_FI_DEV_XID_ERRORS")
    return float(h.xid_last or 0)


def _mask(gpu: GpuSample) -> float | None:
    return None if gpu.clock_event_mask is None else float(gpu.clock_event_mask)


DCGM_FIELDS: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", _scaled("sm_clock_mhz")),
    DcgmField("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", _scaled("mem_clock_mhz")),
    DcgmField("DCGM_FI_DEV_MAX_SM_CLOCK", "gauge", "Maximum SM clock frequency (in MHz).",
              _scaled("sm_clock_max_mhz")),
    DcgmField("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons (bitmask).", _mask),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", _scaled("temperature_c")),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", _scaled("power_w")),
    DcgmField("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", "Enforced power limit (in W).",
              _scaled("power_limit_w")),
    DcgmField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
              _scaled("energy_j", 1000.0)),
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", _scaled("gpu_util")),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", _scaled("mem_util")),
    DcgmField("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", _fb_free),
    DcgmField("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", _mib("mem_used_bytes")),
    DcgmField("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).",
              _mib("mem_reserved_bytes")),
    DcgmField("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).", _mib("mem_total_bytes")),
    DcgmField("DCGM_FI_DEV_PSTATE", "gauge", "Performance state (0 = fastest).", _scaled("pstate")),
    DcgmField("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe current link generation.", _scaled("pcie_link_gen")),
    DcgmField("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe current link width.", _scaled("pcie_link_width")),
    DcgmField("DCGM_FI_DEV_MIG_MODE", "gauge", "MIG mode (1 = enabled).", _scaled("mig_mode")),
    DcgmField("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.",
              _scaled("ecc_corrected")),
    DcgmField("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
              _scaled("ecc_uncorrected")),
    DcgmField("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).",
              _health("memory_temperature_c", "DCGM_FI_DEV_MEMORY_TEMP")),
    DcgmField("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.",
              _health("pcie_replays", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER")),
    DcgmField("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).",
              _health("encoder_util", "DCGM_FI_DEV_ENC_UTIL")),
    DcgmField("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).",
              _health("decoder_util", "DCGM_FI_DEV_DEC_UTIL")),
    DcgmField("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", _last_xid),
    DcgmField("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable "
              "errors", _health("remapped_rows_uncorrectable", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")),
    DcgmField("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors",
              _health("remapped_rows_correctable", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS")),
    DcgmField("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed",
              _health("row_remap_failure", "DCGM_FI_DEV_ROW_REMAP_FAILURE")),
    DcgmField("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
              _prof_ratio("graphics_active")),
    DcgmField("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned.",
              _prof_ratio("sm_active")),
    DcgmField("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM.",
              _prof_ratio("sm_occupancy")),
    DcgmField("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.",
              _prof_ratio("tensor_active")),
    DcgmField("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active "
              "sending or receiving data.", _prof_ratio("dram_active")),
    DcgmField("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "Ratio of cycles the fp64 pipes are active.",
              _prof_ratio("fp64_active")),
    DcgmField("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "Ratio of cycles the fp32 pipes are active.",
              _prof_ratio("fp32_active")),
    DcgmField("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "Ratio of cycles the fp16 pipes are active.",
              _prof_ratio("fp16_active")),
    DcgmField("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus - including "
              "both protocol headers and data payloads - in bytes per second.", _prof("pcie_tx_bytes_s")),
    DcgmField("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus - including "
              "both protocol headers and data payloads - in bytes per second.", _prof("pcie_rx_bytes_s")),
)


def dcgm_label_values(gpu: GpuSample, hostname: str) -> list[str]:
    """Values of :data:`DCGM_LABELS` then :data:`POD_LABELS` for ``gpu`` ("" where unknown: no label)."""
    return [str(gpu.index), gpu.uuid, gpu.pci_bus_id or "", f"nvidia{gpu.index}", gpu.name or "", hostname,
            gpu.driver_version or "", *(gpu.labels.get(k, "") for k in POD_LABELS)]
