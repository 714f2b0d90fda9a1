"""Every exporter name of a measurement lands in the same Snapshot slot, in the model's unit."""

from __future__ import annotations

import pytest

from gpuwatch.model.snapshot import GpuSample
from gpuwatch.sources.dcgm.convert import to_gpu_sample
from gpuwatch.sources.dcgm.parse import parse_body

MIB = 1024 * 1024
LABELS = 'gpu="0",UUID="GPU-0",modelName="NVIDIA H200"'


def one(*series: tuple[str, float]) -> GpuSample:
    body = "".join(f"{name}{{{LABELS}}} {value!r}\n" for name, value in series)
    (gpu,) = parse_body(body)
    return to_gpu_sample(gpu)


def read(gpu: GpuSample, where: str) -> object:
    """``"power_w"`` (a GpuSample slot), ``"prof.sm_active"`` (profiling["dcgm"]) or ``"extra.NAME"``."""
    kind, _, name = where.partition(".")
    if kind == "prof":
        return getattr(gpu.profiling["dcgm"], name)
    if kind == "extra":
        return gpu.extra[name]
    return getattr(gpu, where)


# (exporter name, value as the exporter writes it, where it lands, value in the model's unit)
CASES = [
    # clocks: MHz up to 4.8, Hz from 4.9 -> MHz
    ("DCGM_FI_DEV_SM_CLOCK", 1980, "sm_clock_mhz", 1980.0),
    ("DCGM_FI_DEV_SM_CLOCK_HERTZ", 1_980_000_000, "sm_clock_mhz", 1980.0),
    ("DCGM_FI_DEV_MEM_CLOCK", 2619, "mem_clock_mhz", 2619.0),
    ("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", 2_619_000_000, "mem_clock_mhz", 2619.0),
    ("DCGM_FI_DEV_MAX_SM_CLOCK", 1980, "sm_clock_max_mhz", 1980.0),
    ("DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ", 1_980_000_000, "sm_clock_max_mhz", 1980.0),
    ("DCGM_FI_DEV_VIDEO_CLOCK_HERTZ", 1_755_000_000, "extra.DCGM_FI_DEV_VIDEO_CLOCK", 1755.0),
    # temperature and power: renamed, same unit
    ("DCGM_FI_DEV_GPU_TEMP", 64, "temperature_c", 64.0),
    ("DCGM_FI_DEV_GPU_TEMP_CELSIUS", 64, "temperature_c", 64.0),
    ("DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", 58, "extra.DCGM_FI_DEV_MEMORY_TEMP", 58.0),
    ("DCGM_FI_DEV_POWER_USAGE", 612.877, "power_w", 612.877),
    ("DCGM_FI_DEV_BOARD_POWER_WATTS", 612.877, "power_w", 612.877),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 700, "power_limit_w", 700.0),
    # energy: mJ up to 4.8, J from 4.9 -> J
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 152997310446, "energy_j", 152997310.446),
    ("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", 152997310.446, "energy_j", 152997310.446),
    # utilisation: percent up to 4.8, ratio from 4.9 -> percent
    ("DCGM_FI_DEV_GPU_UTIL", 97, "gpu_util", 97.0),
    ("DCGM_FI_DEV_GPU_UTIL_RATIO", 0.97, "gpu_util", 97.0),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", 61, "mem_util", 61.0),
    ("DCGM_FI_DEV_MEMORY_UTIL_RATIO", 0.61, "mem_util", 61.0),
    ("DCGM_FI_DEV_ENC_UTIL_RATIO", 0.25, "extra.DCGM_FI_DEV_ENC_UTIL", 25.0),
    ("DCGM_FI_DEV_DEC_UTIL", 3, "extra.DCGM_FI_DEV_DEC_UTIL", 3.0),
    # framebuffer: MiB up to 4.8, bytes from 4.9 -> bytes
    ("DCGM_FI_DEV_FB_USED", 131842, "mem_used_bytes", 131842 * MIB),
    ("DCGM_FI_DEV_FB_USED_BYTES", 131842 * MIB, "mem_used_bytes", 131842 * MIB),
    ("DCGM_FI_DEV_FB_RESERVED", 585, "mem_reserved_bytes", 585 * MIB),
    ("DCGM_FI_DEV_FB_RESERVED_BYTES", 585 * MIB, "mem_reserved_bytes", 585 * MIB),
    ("DCGM_FI_DEV_FB_FREE", 11344, "extra.DCGM_FI_DEV_FB_FREE", 11344.0 * MIB),
    ("DCGM_FI_DEV_FB_FREE_BYTES", 11344 * MIB, "extra.DCGM_FI_DEV_FB_FREE", 11344.0 * MIB),
    ("DCGM_FI_DEV_FB_TOTAL", 143771, "mem_total_bytes", 143771 * MIB),
    ("DCGM_FI_DEV_FB_CAPACITY_BYTES", 143771 * MIB, "mem_total_bytes", 143771 * MIB),
    # clock events: the bitmask under either name, decoded
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 4, "clock_event_mask", 4),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 4, "clock_event_mask", 4),
    # PCIe: NVML throughput KB/s -> bytes/s; link state; replay counter under either name
    ("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", 1000, "pcie_tx_bytes_s", 1024000.0),
    ("DCGM_FI_DEV_PCIE_LINK_GEN", 5, "pcie_link_gen", 5),
    ("DCGM_FI_DEV_PCIE_LINK_WIDTH", 16, "pcie_link_width", 16),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 3, "extra.DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 3.0),
    ("DCGM_FI_DEV_PCIE_REPLAY_TOTAL", 3, "extra.DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 3.0),
    # errors and state
    ("DCGM_FI_DEV_XID_ERRORS", 31, "extra.DCGM_FI_DEV_XID_ERRORS", 31.0),
    ("DCGM_FI_DEV_XID_ERROR", 31, "extra.DCGM_FI_DEV_XID_ERRORS", 31.0),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 2, "ecc_uncorrected", 2),
    ("DCGM_FI_DEV_ROW_REMAP_FAILED", 1, "extra.DCGM_FI_DEV_ROW_REMAP_FAILURE", 1.0),
    ("DCGM_FI_DEV_MIG_MODE", 1, "mig_mode", True),
    ("DCGM_FI_DEV_PSTATE", 0, "pstate", 0),
    # NVLink aggregate: MB/s up to 4.8, bytes/s from 4.9 -> bytes/s
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 450, "extra.DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 450e6),
    ("DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND", 450e6, "extra.DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 450e6),
    # profiling: ratio under every name -> percent in profiling["dcgm"]
    ("DCGM_FI_PROF_SM_ACTIVE", 0.87193, "prof.sm_active", 87.193),
    ("DCGM_FI_PROF_SM_UTIL_RATIO", 0.87193, "prof.sm_active", 87.193),
    ("DCGM_FI_PROF_SM_OCCUPANCY", 0.402617, "prof.sm_occupancy", 40.2617),
    ("DCGM_FI_PROF_SM_OCCUPANCY_RATIO", 0.402617, "prof.sm_occupancy", 40.2617),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.512284, "prof.tensor_active", 51.2284),
    ("DCGM_FI_PROF_TENSOR_UTIL_RATIO", 0.512284, "prof.tensor_active", 51.2284),
    ("DCGM_FI_PROF_DRAM_ACTIVE", 0.633071, "prof.dram_active", 63.3071),
    ("DCGM_FI_PROF_DRAM_UTIL_RATIO", 0.633071, "prof.dram_active", 63.3071),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.964502, "prof.graphics_active", 96.4502),
    ("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", 0.964502, "prof.graphics_active", 96.4502),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", 0.2, "prof.fp16_active", 20.0),
    ("DCGM_FI_PROF_FP32_UTIL_RATIO", 0.3, "prof.fp32_active", 30.0),
    # PCIe profiling: bytes/s under the <=4.9 and the 4.10 name
    ("DCGM_FI_PROF_PCIE_TX_BYTES", 2210937, "prof.pcie_tx_bytes_s", 2210937.0),
    ("DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", 2210937, "prof.pcie_tx_bytes_s", 2210937.0),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", 18734210, "prof.pcie_rx_bytes_s", 18734210.0),
    ("DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", 18734210, "prof.pcie_rx_bytes_s", 18734210.0),
    # fields gpuwatch has no table entry for: extra under their own name, suffix units honoured
    ("DCGM_FI_DEV_POWER_VIOLATION", 12345, "extra.DCGM_FI_DEV_POWER_VIOLATION", 12345.0),
    ("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", 0.5, "extra.DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", 50.0),
    ("DCGM_FI_PROF_INT_UTIL_RATIO", 0.1, "extra.DCGM_FI_PROF_INT_UTIL_RATIO", 10.0),
    ("DCGM_FI_DEV_SOME_FUTURE_CLOCK_HERTZ", 5e8, "extra.DCGM_FI_DEV_SOME_FUTURE_CLOCK_HERTZ", 500.0),
]


@pytest.mark.parametrize(("name", "raw", "where", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_exporter_name_lands_in_its_slot_in_model_units(name: str, raw: float, where: str,
                                                              expected: object) -> None:
    value = read(one((name, raw)), where)
    assert value == pytest.approx(expected)
    assert type(value) is type(expected)


def test_clock_event_mask_is_decoded_into_names() -> None:
    gpu = one(("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 0x44))
    assert gpu.clock_events == ("power_cap", "hw_thermal")


def test_memory_total_is_used_plus_free_plus_reserved_when_the_exporter_sends_no_total() -> None:
    gpu = one(("DCGM_FI_DEV_FB_USED", 100), ("DCGM_FI_DEV_FB_FREE", 20), ("DCGM_FI_DEV_FB_RESERVED", 5))
    assert gpu.mem_total_bytes == 125 * MIB
    assert gpu.mem_used_ratio == pytest.approx(0.8)


def test_an_exporter_total_wins_over_the_derived_one() -> None:
    gpu = one(("DCGM_FI_DEV_FB_USED", 100), ("DCGM_FI_DEV_FB_FREE", 20), ("DCGM_FI_DEV_FB_CAPACITY_BYTES", 130 * MIB))
    assert gpu.mem_total_bytes == 130 * MIB


def test_a_gpu_without_profiling_fields_has_no_dcgm_profiling_entry() -> None:
    assert one(("DCGM_FI_DEV_GPU_TEMP", 40)).profiling == {}
