"""One parsed dcgm-exporter GPU -> one :class:`GpuSample` in the model's units.

Field names and unit factors come from :mod:`fields`; this module only places converted values:
model slots, ``profiling["dcgm"]``, ``extra``, the clock-event mask and its decoded names, and the memory
total, which dcgm-exporter's default set does not carry and gpuwatch derives as used + free + reserved
(what NVML's v2 memory call reports as total).
"""

from __future__ import annotations

import math
from typing import Any

from gpuwatch.model.clock_events import decode
from gpuwatch.model.snapshot import GpuSample, Profiling
from gpuwatch.sources.dcgm.fields import lookup
from gpuwatch.sources.dcgm.parse import ParsedGpu

#: Slots the model types as int (counts, bytes, states); everything else stays float.
_INT_SLOTS = frozenset({
    "mem_used_bytes", "mem_total_bytes", "mem_reserved_bytes", "pstate", "pcie_link_gen", "pcie_link_width",
    "ecc_corrected", "ecc_uncorrected",
})

#: Largest magnitude taken as a reading (an exabyte, or 10^18 of any other unit).
MAX_VALUE = 1e18

#: Name of this backend in ``GpuSample.profiling``.
PROFILING_KEY = "dcgm"


def _slot_value(slot: str, value: float) -> Any:
    if slot in _INT_SLOTS:
        return round(value)
    if slot == "mig_mode":
        return bool(value)
    return value


def to_gpu_sample(gpu: ParsedGpu) -> GpuSample:
    """The Snapshot's view of one GPU the exporter described."""
    slots: dict[str, Any] = {}
    prof: dict[str, float] = {}
    extra: dict[str, float] = {}
    mask: int | None = None
    for name, raw in gpu.values.items():
        spec = lookup(name)
        value = spec.convert(raw)
        if not math.isfinite(value) or abs(value) > MAX_VALUE:
            continue  # a reading no GPU can have (1e308 MiB): drop this field, keep the GPU and the scrape
        f = spec.field
        if f.kind == "gpu":
            slots.setdefault(f.slot, _slot_value(f.slot, value))
        elif f.kind == "prof":
            prof.setdefault(f.slot, value)
        elif f.kind == "mask":
            mask = int(value) if mask is None else mask
        else:
            extra.setdefault(f.key, value)
    if "mem_total_bytes" not in slots and "mem_used_bytes" in slots and "DCGM_FI_DEV_FB_FREE" in extra:
        slots["mem_total_bytes"] = (slots["mem_used_bytes"] + round(extra["DCGM_FI_DEV_FB_FREE"])
                                    + slots.get("mem_reserved_bytes", 0))
    return GpuSample(
        index=gpu.index,
        uuid=gpu.uuid,
        name=gpu.name,
        pci_bus_id=gpu.pci_bus_id,
        driver_version=gpu.driver_version,
        clock_event_mask=mask,
        clock_events=decode(mask),
        profiling={PROFILING_KEY: Profiling(**prof)} if prof else {},
        extra=dict(sorted(extra.items())),
        labels=dict(gpu.labels),
        **slots,
    )


def to_gpu_samples(gpus: list[ParsedGpu]) -> tuple[GpuSample, ...]:
    return tuple(to_gpu_sample(g) for g in gpus)
