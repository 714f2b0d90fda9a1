"""Which dcgm-exporter metric fills which Snapshot slot, and how to bring its unit to the model's.

dcgm-exporter has shipped the same measurement under several names:

* up to 4.8: ``DCGM_FI_DEV_SM_CLOCK`` (MHz), ``DCGM_FI_DEV_GPU_UTIL`` (%), ``DCGM_FI_DEV_FB_USED`` (MiB),
  ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (mJ), ``DCGM_FI_PROF_SM_ACTIVE`` (ratio) ...
* 4.9 (DCGM 4.7) renamed the default fields to DCGM's canonical names and, for eleven of them, changed the
  unit: ``DCGM_FI_DEV_SM_CLOCK_HERTZ`` (Hz), ``DCGM_FI_DEV_GPU_UTIL_RATIO`` (0-1),
  ``DCGM_FI_DEV_FB_USED_BYTES``, ``DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL``, ``DCGM_FI_PROF_SM_UTIL_RATIO`` ...
* 4.10 renamed ``DCGM_FI_PROF_PCIE_TX_BYTES`` to ``DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND`` (same unit).

Every name of one measurement maps to one :class:`Field` with a per-name factor, so the Snapshot holds the
same number in the same unit whichever exporter fed it. A field without a model slot lands in
``GpuSample.extra`` under its pre-4.9 exporter name (the name dashboards and the reference samples use),
in the model's units: percent, MHz, bytes, bytes/s, watts, joules, degrees Celsius, plain counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuwatch.model.snapshot import MIB

Kind = Literal["gpu", "prof", "extra", "mask"]



@dataclass(frozen=True, slots=True)
class Field:
    """One measurement: where it goes and under which key it is known."""

    #: The pre-4.9 exporter name: the key in ``GpuSample.extra`` and in :data:`BY_NAME` lookups.
    key: str
    #: "gpu": a GpuSample attribute; "prof": a Profiling attribute; "extra": GpuSample.extra[key];
    #: "mask": the clock-event bitmask.
    kind: Kind
    slot: str = ""


@dataclass(frozen=True, slots=True)
class Name:
    """One exporter name of a :class:`Field`, with the factor that turns its value into the model's unit."""

    field: Field
    factor: float = 1.0
    divisor: float = 1.0

    def convert(self, value: float) -> float:
        # Dividing rather than multiplying by 1e-3 keeps mJ -> J and Hz -> MHz exact for exact inputs.
        return value * self.factor / self.divisor


_PERCENT = 100.0  # ratio 0-1 -> percent 0-100


def _table() -> dict[str, Name]:
    names: dict[str, Name] = {}

    def add(kind: Kind, slot: str, legacy: str, *others: tuple[str, float, float], factor: float = 1.0,
            divisor: float = 1.0) -> None:
        f = Field(legacy, kind, slot)
        names[legacy] = Name(f, factor, divisor)
        for name, fac, div in others:
            names[name] = Name(f, fac, div)

    same = 1.0, 1.0
    hz = 1.0, 1e6           # Hz -> MHz
    ratio = _PERCENT, 1.0   # ratio -> percent

    # Clocks: MHz before 4.9, hertz from 4.9.
    add("gpu", "sm_clock_mhz", "DCGM_FI_DEV_SM_CLOCK", ("DCGM_FI_DEV_SM_CLOCK_HERTZ", *hz))
    add("gpu", "mem_clock_mhz", "DCGM_FI_DEV_MEM_CLOCK", ("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", *hz))
    add("gpu", "sm_clock_max_mhz", "DCGM_FI_DEV_MAX_SM_CLOCK", ("DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ", *hz))
    add("extra", "", "DCGM_FI_DEV_MAX_MEM_CLOCK", ("DCGM_FI_DEV_MEMORY_MAX_CLOCK_HERTZ", *hz))
    add("extra", "", "DCGM_FI_DEV_VIDEO_CLOCK", ("DCGM_FI_DEV_VIDEO_CLOCK_HERTZ", *hz))
    add("extra", "", "DCGM_FI_DEV_APP_SM_CLOCK", ("DCGM_FI_DEV_SM_APP_CLOCK_HERTZ", *hz))
    add("extra", "", "DCGM_FI_DEV_APP_MEM_CLOCK", ("DCGM_FI_DEV_MEMORY_APP_CLOCK_HERTZ", *hz))
    # Temperature (renamed, same unit).
    add("gpu", "temperature_c", "DCGM_FI_DEV_GPU_TEMP", ("DCGM_FI_DEV_GPU_TEMP_CELSIUS", *same))
    add("extra", "", "DCGM_FI_DEV_MEMORY_TEMP", ("DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", *same))
    # Power and energy: energy was mJ, is J from 4.9.
    add("gpu", "power_w", "DCGM_FI_DEV_POWER_USAGE", ("DCGM_FI_DEV_BOARD_POWER_WATTS", *same))
    add("gpu", "energy_j", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", ("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", *same),
        divisor=1000.0)
    add("gpu", "power_limit_w", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT")
    add("extra", "", "DCGM_FI_DEV_POWER_MGMT_LIMIT")
    # Utilisation: percent before 4.9, ratio from 4.9.
    add("gpu", "gpu_util", "DCGM_FI_DEV_GPU_UTIL", ("DCGM_FI_DEV_GPU_UTIL_RATIO", *ratio))
    add("gpu", "mem_util", "DCGM_FI_DEV_MEM_COPY_UTIL", ("DCGM_FI_DEV_MEMORY_UTIL_RATIO", *ratio))
    add("extra", "", "DCGM_FI_DEV_ENC_UTIL", ("DCGM_FI_DEV_ENC_UTIL_RATIO", *ratio))
    add("extra", "", "DCGM_FI_DEV_DEC_UTIL", ("DCGM_FI_DEV_DEC_UTIL_RATIO", *ratio))
    add("extra", "", "DCGM_FI_DEV_FAN_SPEED", ("DCGM_FI_DEV_FAN_SPEED_RATIO", *ratio))
    # Framebuffer: MiB before 4.9, bytes from 4.9 (the legacy names get factor MiB, the new ones 1).
    framebuffer: tuple[tuple[Kind, str, str, str], ...] = (
        ("gpu", "mem_used_bytes", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_USED_BYTES"),
        ("extra", "", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_FREE_BYTES"),
        ("gpu", "mem_reserved_bytes", "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_RESERVED_BYTES"),
        ("gpu", "mem_total_bytes", "DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_FB_CAPACITY_BYTES"),
    )
    for kind, slot, legacy, new in framebuffer:
        add(kind, slot, legacy, (new, *same), factor=float(MIB))
    # PCIe.
    add("gpu", "pcie_tx_bytes_s", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", factor=1024.0)  # NVML KB/s
    add("gpu", "pcie_rx_bytes_s", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", factor=1024.0)
    add("gpu", "pcie_link_gen", "DCGM_FI_DEV_PCIE_LINK_GEN")
    add("gpu", "pcie_link_width", "DCGM_FI_DEV_PCIE_LINK_WIDTH")
    add("extra", "", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", ("DCGM_FI_DEV_PCIE_REPLAY_TOTAL", *same))
    # State, clock events, errors.
    add("gpu", "pstate", "DCGM_FI_DEV_PSTATE", ("DCGM_FI_DEV_GPU_PSTATE", *same))
    add("gpu", "mig_mode", "DCGM_FI_DEV_MIG_MODE")
    add("mask", "clock_event_mask", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", *same))
    add("extra", "", "DCGM_FI_DEV_XID_ERRORS", ("DCGM_FI_DEV_XID_ERROR", *same))
    add("gpu", "ecc_corrected", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL")
    add("gpu", "ecc_uncorrected", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
    add("extra", "", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", ("DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", *same))
    add("extra", "", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", ("DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", *same))
    add("extra", "", "DCGM_FI_DEV_ROW_REMAP_FAILURE", ("DCGM_FI_DEV_ROW_REMAP_FAILED", *same))
    # NVLink aggregate throughput: MB/s before 4.9, bytes/s from 4.9.
    add("extra", "", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", ("DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL", 1e6, 1.0),
        ("DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND", *same), factor=1e6)
    # Profiling (DCGM_FI_PROF_*): ratios 0-1 become percent; PCIe/NVLink rates are bytes/s already.
    for slot, legacy, new in (
        ("graphics_active", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"),
        ("sm_active", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_UTIL_RATIO"),
        ("sm_occupancy", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_OCCUPANCY_RATIO"),
        ("tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO"),
        ("dram_active", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO"),
        ("fp64_active", "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_FP64_UTIL_RATIO"),
        ("fp32_active", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_FP32_UTIL_RATIO"),
        ("fp16_active", "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "DCGM_FI_PROF_FP16_UTIL_RATIO"),
    ):
        add("prof", slot, legacy, (new, *ratio), factor=_PERCENT)
    add("prof", "pcie_tx_bytes_s", "DCGM_FI_PROF_PCIE_TX_BYTES", ("DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", *same))
    add("prof", "pcie_rx_bytes_s", "DCGM_FI_PROF_PCIE_RX_BYTES", ("DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", *same))
    add("extra", "", "DCGM_FI_PROF_NVLINK_TX_BYTES", ("DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND", *same))
    add("extra", "", "DCGM_FI_PROF_NVLINK_RX_BYTES", ("DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND", *same))
    return names


#: Every exporter name gpuwatch understands, across generations.
BY_NAME: dict[str, Name] = _table()


def lookup(name: str) -> Name:
    """The :class:`Name` for a metric; an unknown ``DCGM_FI_*`` field goes to ``extra`` under its own name,
    with the unit its suffix states brought to the model's (``_RATIO`` and profiling ``_ACTIVE`` -> percent,
    ``_HERTZ`` -> MHz); anything else is kept as the exporter wrote it."""
    known = BY_NAME.get(name)
    if known is not None:
        return known
    f = Field(name, "extra")
    if name.endswith("_RATIO") or (name.startswith("DCGM_FI_PROF_") and name.endswith("_ACTIVE")):
        return Name(f, _PERCENT)
    if name.endswith("_HERTZ"):
        return Name(f, 1.0, 1e6)
    return Name(f)
