"""Per-GPU metric families: the catalogue's GPU metrics in base units, one series per clock-event reason,
profiling counters per backend, identity and PCIe link, and the label helpers the other families share.

Profiling (SM activity, occupancy, tensor, DRAM...): the catalogue name (``gpuwatch_gpu_sm_active_ratio``)
carries one series per GPU from the preferred backend (GPM, else DCGM) so alert rules match exactly one
series per GPU. ``gpuwatch_gpu_profiling_<field>_ratio{source="gpm"|"dcgm"}`` carries every backend's own
value, for comparing them when both run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpuwatch.model.clock_events import CLOCK_EVENT_BITS
from gpuwatch.model.metrics import METRICS, read_metric
from gpuwatch.model.snapshot import GPU_LABELS, PROFILING_SOURCES, GpuSample, Profiling, Snapshot

_BAD = re.compile(r"[^a-zA-Z0-9_]")


def label_name(key: str) -> str:
    """A valid Prometheus label name for ``key`` (``app.kubernetes.io/name`` -> ``app_kubernetes_io_name``)."""
    name = _BAD.sub("_", key)
    if not name or name[0].isdigit():
        name = "_" + name
    if name.startswith("__"):
        name = "x" + name
    return name


def gpu_values(snap: Snapshot, gpu: GpuSample) -> list[str]:
    """Values of :data:`GPU_LABELS`: join on ``uuid`` across hosts, read ``gpu`` (the index) on one host."""
    return list(gpu.identity_labels(snap.host.hostname).values())


def union_label_names(maps: Iterable[Mapping[str, str]], exclude: Iterable[str] = ()) -> list[str]:
    """Sorted union of the sanitised keys of ``maps``: one label set for a family whose members differ."""
    skip = set(exclude)
    names = {label_name(k) for m in maps for k in m}
    return sorted(names - skip)


def values_for(names: list[str], mapping: Mapping[str, str]) -> list[str]:
    clean = {label_name(k): v for k, v in mapping.items()}
    return [str(clean.get(n, "")) for n in names]


CLOCK_REASONS = tuple(name for name, _ in CLOCK_EVENT_BITS.values())
_PROFILING_RATIOS = tuple(f.name for f in dataclasses.fields(Profiling) if f.name.endswith("_active")
                          or f.name == "sm_occupancy")


def _catalogue(snap: Snapshot) -> Iterator[Metric]:
    for spec in METRICS.values():
        if spec.scope != "gpu" or spec.prom_name is None:
            continue
        doc = f"{spec.help} ({spec.key})"
        family: GaugeMetricFamily | CounterMetricFamily
        if spec.prom_name.endswith("_total"):
            family = CounterMetricFamily(spec.prom_name[: -len("_total")], doc, labels=GPU_LABELS)
        else:
            family = GaugeMetricFamily(spec.prom_name, doc, labels=GPU_LABELS)
        for gpu in snap.gpus:
            value = read_metric(spec.key, gpu)
            if value is not None:
                family.add_metric(gpu_values(snap, gpu), value * spec.prom_scale)
        yield family


def _clock_events(snap: Snapshot) -> Iterator[Metric]:
    family = GaugeMetricFamily("gpuwatch_gpu_clock_event_active",
                               "1 while this clock-event (throttle) reason holds the GPU's clocks down",
                               labels=[*GPU_LABELS, "reason"])
    for gpu in snap.gpus:
        if not gpu.clock_events_known:
            continue  # unknown is not "no reason": leave the series out
        active = gpu.active_clock_events
        reasons = list(CLOCK_REASONS) + sorted(active - set(CLOCK_REASONS))
        for reason in reasons:
            family.add_metric([*gpu_values(snap, gpu), reason], 1.0 if reason in active else 0.0)
    yield family


def _profiling(snap: Snapshot) -> Iterator[Metric]:
    for field_name in _PROFILING_RATIOS:
        family = GaugeMetricFamily(f"gpuwatch_gpu_profiling_{field_name}_ratio",
                                   f"{field_name.replace('_', ' ')} as reported by each profiling backend",
                                   labels=[*GPU_LABELS, "source"])
        for gpu in snap.gpus:
            for source in PROFILING_SOURCES:
                prof = gpu.profiling.get(source)
                value = None if prof is None else getattr(prof, field_name)
                if value is not None and value == value:
                    family.add_metric([*gpu_values(snap, gpu), source], float(value) / 100.0)
        yield family


def _identity(snap: Snapshot) -> Iterator[Metric]:
    extra = union_label_names((g.labels for g in snap.gpus), exclude=(*GPU_LABELS, "pci_bus_id", "driver_version"))
    info = GaugeMetricFamily("gpuwatch_gpu_info", "GPU identity; constant 1 (labels carry the facts)",
                             labels=[*GPU_LABELS, "pci_bus_id", "driver_version", *extra])
    gen = GaugeMetricFamily("gpuwatch_gpu_pcie_link_generation", "current PCIe link generation",
                            labels=GPU_LABELS)
    width = GaugeMetricFamily("gpuwatch_gpu_pcie_link_width", "current PCIe link width (lanes)", labels=GPU_LABELS)
    mig = GaugeMetricFamily("gpuwatch_gpu_mig_mode_enabled", "1 when MIG mode is on", labels=GPU_LABELS)
    reserved = GaugeMetricFamily("gpuwatch_gpu_memory_reserved_bytes", "device memory the driver reserves",
                                 labels=GPU_LABELS)
    for gpu in snap.gpus:
        base = gpu_values(snap, gpu)
        info.add_metric([*base, gpu.pci_bus_id or "", gpu.driver_version or "", *values_for(extra, gpu.labels)], 1)
        if gpu.pcie_link_gen is not None:
            gen.add_metric(base, gpu.pcie_link_gen)
        if gpu.pcie_link_width is not None:
            width.add_metric(base, gpu.pcie_link_width)
        if gpu.mig_mode is not None:
            mig.add_metric(base, 1.0 if gpu.mig_mode else 0.0)
        if gpu.mem_reserved_bytes is not None:
            reserved.add_metric(base, gpu.mem_reserved_bytes)
    yield from (info, gen, width, mig, reserved)


def _extras(snap: Snapshot) -> Iterator[Metric]:
    """Backend fields the model has no slot for (e.g. DCGM XID errors), one family keyed by ``field``."""
    family = GaugeMetricFamily("gpuwatch_gpu_backend_field", "a backend value without a slot in the model",
                               labels=[*GPU_LABELS, "field"])
    for gpu in snap.gpus:
        for key, value in sorted(gpu.extra.items()):
            if value == value:
                family.add_metric([*gpu_values(snap, gpu), label_name(key)], float(value))
    yield family


def gpu_families(snap: Snapshot) -> Iterator[Metric]:
    yield from _catalogue(snap)
    yield from _clock_events(snap)
    yield from _profiling(snap)
    yield from _identity(snap)
    yield from _extras(snap)
