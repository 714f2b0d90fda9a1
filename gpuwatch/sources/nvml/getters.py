"""The NVML getters gpuwatch reads per GPU, each with the conversion into GpuSample fields (model units).

A :class:`Getter` is built once per GPU with its arguments bound, so a tick only calls and converts.
Cheap getters (1-8 µs on the H200) run every tick; slow ones (total energy 4 ms, ECC 150 µs, MIG 160 µs,
PCIe throughput 21 ms) on the slow cadence. Between them, the *rare* getters: values that change only when
an administrator or the driver changes them (the enforced power limit, the PCIe link's generation and
width; the width alone costs 26 µs on the H200), read every ``RARE_EVERY_S`` and at once on the tick the
performance state changes (the driver retrains the link's speed with it). Where a driver lacks the newer
API, ``fallback`` names the older one (clock *event* reasons -> clock *throttle* reasons; memory info v2 -> v1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwatch.model.clock_events import decode

Values = dict[str, Any]
Apply = Callable[[Any, Values], None]

_DECODED: dict[int, tuple[str, ...]] = {}

#: Seconds between reads of the rare getters: the health worker's interval. A power limit set by hand or a
#: link that retrained narrower shows within it; a link speed that follows the performance state, at once.
RARE_EVERY_S = 10.0


@dataclass(slots=True)
class Getter:
    """One NVML call for one GPU: ``fn(handle, *args)``, then ``apply(result, values)``."""

    key: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    apply: Apply
    #: The older API to switch to on FunctionNotFound / version mismatch: (fn, args, apply).
    fallback: tuple[Callable[..., Any], tuple[Any, ...], Apply] | None = None
    #: Set once NVML said it will never answer (NotSupported, NoPermission, no such function).
    off: str | None = None


def _util(r: Any, v: Values) -> None:
    v["gpu_util"] = float(r.gpu)
    v["mem_util"] = float(r.memory)


def _memory_v2(r: Any, v: Values) -> None:
    v["mem_used_bytes"] = int(r.used)
    v["mem_total_bytes"] = int(r.total)
    v["mem_reserved_bytes"] = int(r.reserved)


def _memory_v1(r: Any, v: Values) -> None:
    # The v1 struct counts the driver's reservation as used; there is no separate reserved figure.
    v["mem_used_bytes"] = int(r.used)
    v["mem_total_bytes"] = int(r.total)


def _field(name: str, *, div: float | None = None, mul: float | None = None,
           cast: Callable[[Any], Any] = float) -> Apply:
    """Store the result under ``name``: divided (mW -> W, exact for the integers NVML gives), multiplied
    (KiB -> bytes) or cast."""
    if div is not None:
        def apply(r: Any, v: Values) -> None:
            v[name] = r / div
    elif mul is not None:
        def apply(r: Any, v: Values) -> None:
            v[name] = r * mul
    else:
        def apply(r: Any, v: Values) -> None:
            v[name] = cast(r)
    apply.__name__ = f"apply_{name}"
    return apply


def _pstate(r: Any, v: Values) -> None:
    v["pstate"] = int(r) if 0 <= int(r) < 16 else None  # NVML_PSTATE_UNKNOWN is 32


def _clock_events(r: Any, v: Values) -> None:
    mask = int(r)
    names = _DECODED.get(mask)
    if names is None:
        names = _DECODED[mask] = decode(mask)
    v["clock_event_mask"] = mask
    v["clock_events"] = names


def _mig(nvml: Any) -> Apply:
    enabled = nvml.NVML_DEVICE_MIG_ENABLE

    def apply(r: Any, v: Values) -> None:
        v["mig_mode"] = r[0] == enabled

    return apply


def _takes_version(fn: Any) -> bool:
    """Whether ``fn`` accepts a struct version after the handle. Some tools replace pynvml's function with a
    one-argument wrapper in the same process (nvitop does): then only the v1 call works."""
    import inspect

    try:
        params = list(inspect.signature(fn, follow_wrapped=False).parameters.values())
    except (TypeError, ValueError):
        return True
    return len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def _memory(nvml: Any) -> Getter:
    v1 = (nvml.nvmlDeviceGetMemoryInfo, (), _memory_v1)
    version = getattr(nvml, "nvmlMemory_v2", None)  # bindings older than the v2 struct lack it
    if version is None or not _takes_version(nvml.nvmlDeviceGetMemoryInfo):
        return Getter("memory", *v1)
    return Getter("memory", nvml.nvmlDeviceGetMemoryInfo, (version,), _memory_v2, fallback=v1)


def _clock_event_reasons(nvml: Any) -> Getter:
    throttle = (nvml.nvmlDeviceGetCurrentClocksThrottleReasons, (), _clock_events)
    events = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)  # named so since r535
    if events is None:
        return Getter("clock_events", *throttle)
    return Getter("clock_events", events, (), _clock_events, fallback=throttle)


def fast_getters(nvml: Any) -> list[Getter]:
    """Every-tick getters, in the order they are called."""
    return [
        Getter("utilization", nvml.nvmlDeviceGetUtilizationRates, (), _util),
        _memory(nvml),
        Getter("temperature", nvml.nvmlDeviceGetTemperature, (nvml.NVML_TEMPERATURE_GPU,),
               _field("temperature_c")),
        Getter("power", nvml.nvmlDeviceGetPowerUsage, (), _field("power_w", div=1000.0)),
        Getter("sm_clock", nvml.nvmlDeviceGetClockInfo, (nvml.NVML_CLOCK_SM,), _field("sm_clock_mhz")),
        Getter("mem_clock", nvml.nvmlDeviceGetClockInfo, (nvml.NVML_CLOCK_MEM,), _field("mem_clock_mhz")),
        Getter("pstate", nvml.nvmlDeviceGetPerformanceState, (), _pstate),
        _clock_event_reasons(nvml),
    ]


def rare_getters(nvml: Any) -> list[Getter]:
    """Getters of values that change only on an administrator's or the driver's action (``RARE_EVERY_S``)."""
    return [
        Getter("power_limit", nvml.nvmlDeviceGetEnforcedPowerLimit, (), _field("power_limit_w", div=1000.0)),
        Getter("pcie_link_gen", nvml.nvmlDeviceGetCurrPcieLinkGeneration, (), _field("pcie_link_gen", cast=int)),
        Getter("pcie_link_width", nvml.nvmlDeviceGetCurrPcieLinkWidth, (), _field("pcie_link_width", cast=int)),
    ]


def mig_getter(nvml: Any) -> Getter:
    return Getter("mig_mode", nvml.nvmlDeviceGetMigMode, (), _mig(nvml))


def slow_getters(nvml: Any, *, pcie_throughput: bool) -> list[Getter]:
    """Slow-cadence getters; NVML's PCIe throughput (21 ms: it samples a counter over 20 ms) only on request."""
    getters = [
        Getter("energy", nvml.nvmlDeviceGetTotalEnergyConsumption, (), _field("energy_j", div=1000.0)),
        Getter("ecc_corrected", nvml.nvmlDeviceGetTotalEccErrors,
               (nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC), _field("ecc_corrected", cast=int)),
        Getter("ecc_uncorrected", nvml.nvmlDeviceGetTotalEccErrors,
               (nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC),
               _field("ecc_uncorrected", cast=int)),
        mig_getter(nvml),
    ]
    if pcie_throughput:
        # NVML says KB/s; nvidia-smi and nvitop read it as KiB/s.
        getters += [
            Getter("pcie_tx", nvml.nvmlDeviceGetPcieThroughput, (nvml.NVML_PCIE_UTIL_TX_BYTES,),
                   _field("pcie_tx_bytes_s", mul=1024.0)),
            Getter("pcie_rx", nvml.nvmlDeviceGetPcieThroughput, (nvml.NVML_PCIE_UTIL_RX_BYTES,),
                   _field("pcie_rx_bytes_s", mul=1024.0)),
        ]
    return getters
