"""A dcgm-exporter /metrics body, parsed with prometheus_client's text parser, grouped per GPU.

dcgm-exporter writes one series per (field, GPU) and repeats the GPU's identity on every series as labels.
This module turns that back into one record per GPU: identity, the labels that say who uses it
(Kubernetes pod, MIG instance, host), and ``{metric name: value}`` as the exporter wrote it. Units and
names are :mod:`fields`' business, not this one's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

#: Label spellings across exporter generations, first match wins.
UUID_LABELS = ("UUID", "gpu_uuid", "uuid")
NAME_LABELS = ("modelName", "model_name")
DRIVER_LABELS = ("DCGM_FI_DRIVER_VERSION", "DCGM_FI_SYSTEM_DRIVER_VERSION")
PCI_LABELS = ("pci_bus_id",)
#: Labels kept on the GPU (exporter spelling -> gpuwatch key). ``Hostname`` became ``hostname`` in 4.8.3.
GPU_LABELS = {
    "Hostname": "hostname",
    "hostname": "hostname",
    "pod": "pod",
    "namespace": "namespace",
    "container": "container",
    "GPU_I_ID": "GPU_I_ID",
    "GPU_I_PROFILE": "GPU_I_PROFILE",
    "hpc_job": "hpc_job",
}


#: GPUs one exporter page may describe (a node has at most a few dozen, MIG instances included).
MAX_GPUS = 256


class DcgmParseError(ValueError):
    """The body is not a dcgm-exporter /metrics page: the message says what was found instead."""


@dataclass
class ParsedGpu:
    """One GPU as the exporter described it; values are raw (exporter units)."""

    index: int
    uuid: str
    name: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    #: Values from whole-GPU series, then (for fields only a MIG instance reported) the first instance's.
    values: dict[str, float] = field(default_factory=dict)
    _mig_values: dict[str, float] = field(default_factory=dict, repr=False)


def _first(labels: dict[str, str], names: tuple[str, ...]) -> str | None:
    for n in names:
        value = labels.get(n)
        if value:
            return value
    return None


def _add_label(gpu: ParsedGpu, key: str, value: str) -> None:
    """A GPU shared by several MIG instances or pods gets every distinct value, comma-separated, in order."""
    have = gpu.labels.get(key)
    if not have:
        gpu.labels[key] = value
    elif value not in have.split(","):
        gpu.labels[key] = f"{have},{value}"


def parse_body(text: str) -> list[ParsedGpu]:
    """The GPUs in a /metrics body, in exporter ``gpu`` index order.

    Raises :class:`DcgmParseError` for a body that does not parse as Prometheus text or holds no
    ``DCGM_FI_*`` series with a ``gpu`` label (an empty page during an exporter reload, an HTML error
    page, a different exporter).
    """
    if not text.strip():
        raise DcgmParseError("empty body (dcgm-exporter may be restarting)")
    gpus: dict[tuple[int, str], ParsedGpu] = {}
    seen_families = 0
    try:
        for family in text_string_to_metric_families(text):
            seen_families += 1
            for sample in family.samples:
                name = _exporter_name(family.name, family.type, sample.name)
                if name.startswith("DCGM_FI_"):
                    _take(gpus, name, sample.labels, sample.value)
    except DcgmParseError:
        raise
    except ValueError as exc:  # prometheus_client raises ValueError("Invalid line: ...") and friends
        raise DcgmParseError(f"not Prometheus text: {_short(str(exc))}") from None
    if not gpus:
        what = f"{seen_families} metric families but" if seen_families else "no metrics and"
        raise DcgmParseError(f"{what} no DCGM_FI_* series with a 'gpu' label: is this a dcgm-exporter?")
    out = sorted(gpus.values(), key=lambda g: (g.index, g.uuid))
    for g in out:
        for name, value in g._mig_values.items():
            g.values.setdefault(name, value)
        g._mig_values.clear()
    return out


def _exporter_name(family: str, kind: str, sample: str) -> str:
    """The metric name as the exporter wrote it: prometheus_client appends ``_total`` to every counter
    sample (``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total``); DCGM names are upper case, so the lower-case
    suffix is always the parser's."""
    if kind == "counter" and sample == f"{family}_total":
        return family
    return sample


def _take(gpus: dict[tuple[int, str], ParsedGpu], name: str, labels: dict[str, str], value: float) -> None:
    raw_index = labels.get("gpu")
    if raw_index is None or not raw_index.isdigit():
        return  # not a GPU entity (NVSwitch, CPU, link) or a per-host exporter metric
    index = int(raw_index)
    uuid = _first(labels, UUID_LABELS) or ""
    gpu = gpus.get((index, uuid))
    if gpu is None:
        if len(gpus) >= MAX_GPUS:
            raise DcgmParseError(f"the page lists more than {MAX_GPUS} GPUs: that is not one node's dcgm-exporter")
        gpu = gpus[(index, uuid)] = ParsedGpu(index=index, uuid=uuid)
    gpu.name = gpu.name or _first(labels, NAME_LABELS)
    gpu.pci_bus_id = gpu.pci_bus_id or _first(labels, PCI_LABELS)
    gpu.driver_version = gpu.driver_version or _first(labels, DRIVER_LABELS)
    for label, key in GPU_LABELS.items():
        if labels.get(label):
            _add_label(gpu, key, labels[label])
    if not math.isfinite(value):
        return  # NaN/Inf: the exporter had no reading; a missing value is None, not a number
    target = gpu._mig_values if labels.get("GPU_I_ID") else gpu.values
    target.setdefault(name, value)


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
