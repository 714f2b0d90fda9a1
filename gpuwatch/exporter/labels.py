"""Label names and values for the exporter: the GPU identity labels every GPU series carries, and
sanitising free-form keys (alert labels, Kubernetes labels) into valid Prometheus label names."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from gpuwatch.model.snapshot import GpuSample, Snapshot

#: Labels on every per-GPU series: join on ``uuid`` across hosts, read ``gpu`` (the index) on one host.
GPU_LABELS = ("gpu", "uuid", "name", "hostname")

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
    return [str(gpu.index), gpu.uuid, gpu.name or "", snap.host.hostname]


def union_label_names(maps: Iterable[Mapping[str, str]], exclude: Iterable[str] = ()) -> list[str]:
    """Sorted union of the sanitised keys of ``maps``: one label set for a family whose members differ."""
    skip = set(exclude)
    names = {label_name(k) for m in maps for k in m}
    return sorted(names - skip)


def values_for(names: list[str], mapping: Mapping[str, str]) -> list[str]:
    clean = {label_name(k): v for k, v in mapping.items()}
    return [str(clean.get(n, "")) for n in names]
