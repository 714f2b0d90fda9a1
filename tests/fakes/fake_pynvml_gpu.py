"""The state of one fake GPU and its processes: plain fields a test sets to what NVML should report.

Defaults are the H200 of the probe log (``reference/h200-probe-2026-12-02.log``) under the BF16 load, so
a fake snapshot looks like a real one. Units are NVML's own (mW, mJ, KB/s, MiB/s for GPM PCIe).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pynvml as _real


class FakeClock:
    """A monotonic clock a test moves by hand: pass it as ``NvmlSource(clock=...)`` and poll at ``clock()``."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


@dataclass(frozen=True)
class FakeHandle:
    """Stands in for a ``c_nvmlDevice_t``: opaque to gpuwatch, the GPU index to the fake."""

    index: int


Method = Callable[..., Any]


def nvml_function(symbol: str | None = None, versioned: str | None = None) -> Callable[[Method], Method]:
    """Marks a method as the fake of a pynvml function: counts the call and applies the knobs first.

    ``symbol`` is the C symbol the real wrapper resolves (FunctionNotFound when in ``missing``);
    ``versioned`` makes it an unversioned wrapper that raises NVMLLibraryMismatchError instead.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        name = fn.__name__

        @functools.wraps(fn)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            self.last_args[name] = args
            self._enter(name, symbol or name, versioned, args[0] if args else None)
            return fn(self, *args, **kwargs)

        method.fake = True  # type: ignore[attr-defined]
        return method

    return wrap


def default_gpm() -> dict[int, float]:
    """GPM metric id -> value for the H200 BF16 phase of the probe log."""
    return {
        _real.NVML_GPM_METRIC_SM_UTIL: 87.5,
        _real.NVML_GPM_METRIC_SM_OCCUPANCY: 51.6,
        _real.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 27.1,
        _real.NVML_GPM_METRIC_DRAM_BW_UTIL: 32.5,
        _real.NVML_GPM_METRIC_GRAPHICS_UTIL: 96.5,
        _real.NVML_GPM_METRIC_FP64_UTIL: 0.0,
        _real.NVML_GPM_METRIC_FP32_UTIL: 15.2,
        _real.NVML_GPM_METRIC_FP16_UTIL: 3.5,
        _real.NVML_GPM_METRIC_PCIE_TX_PER_SEC: 12.9,
        _real.NVML_GPM_METRIC_PCIE_RX_PER_SEC: 74.9,
    }


@dataclass
class FakeProcess:
    pid: int
    #: Bytes of GPU memory; None is what NVML reports as NVML_VALUE_NOT_AVAILABLE.
    used_memory: int | None = 2**30
    #: "compute", "graphics" or "compute+graphics": which running-process lists show it.
    kind: str = "compute"
    sm_util: int = 0
    mem_util: int = 0


@dataclass
class FakeGpu:
    index: int
    name: str = "NVIDIA H200"
    uuid: str = ""
    pci_bus_id: str = ""
    util_gpu: int = 97
    util_mem: int = 42
    mem_total: int = 150_754_820_096
    mem_reserved: int = 644_939_776
    #: Used bytes (v2 meaning, without the reservation); None = the sum of the processes' memory.
    mem_used_override: int | None = None
    temperature: int = 37
    power_mw: int = 412_345
    power_limit_mw: int = 700_000
    sm_clock: int = 1950
    sm_clock_max: int = 1980
    mem_clock: int = 3201
    mem_clock_max: int = 3201
    pstate: int = 0
    clock_reasons: int = 0x4
    pcie_gen: int = 5
    pcie_width: int = 16
    pcie_tx_kbs: int = 980
    pcie_rx_kbs: int = 561
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    mig_mode: bool = False
    energy_mj: int = 4_069_296
    gpm_supported: bool = True
    gpm: dict[int, float] = field(default_factory=default_gpm)
    #: GPM metric id -> nvmlReturn to report for it instead of a value.
    gpm_errors: dict[int, int] = field(default_factory=dict)
    processes: list[FakeProcess] = field(default_factory=list)
    lost: bool = False
    # Health (made-up healthy values, not from the probe log): an 18-link NVLink GPU with every link up.
    #: (correctable, uncorrectable, pending, failure) as nvmlDeviceGetRemappedRows returns them
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)
    pcie_replays: int = 0
    memory_temp: int = 45
    fan_speed: int = 30
    encoder_util: int = 0
    decoder_util: int = 0
    nvlink_active: list[bool] = field(default_factory=lambda: [True] * 18)
    #: KiB sent / received per link, as the NVLink throughput field values count them
    nvlink_tx_kib: list[int] = field(default_factory=lambda: [1000 + i for i in range(18)])
    nvlink_rx_kib: list[int] = field(default_factory=lambda: [2000 + i for i in range(18)])
    #: field id -> nvmlReturn to report for it in nvmlDeviceGetFieldValues
    field_errors: dict[int, int] = field(default_factory=dict)
    xid_supported: bool = True

    def __post_init__(self) -> None:
        self.uuid = self.uuid or f"GPU-00000000-0000-4000-8000-{self.index:012x}"
        self.pci_bus_id = self.pci_bus_id or f"00000000:{self.index + 6:02X}:00.0"

    @property
    def mem_used(self) -> int:
        if self.mem_used_override is not None:
            return self.mem_used_override
        return sum(p.used_memory or 0 for p in self.processes)
