"""A PodResources ``List`` answer -> the Kubernetes labels of each GPU, by device id (the GPU's UUID)."""

from __future__ import annotations

from typing import Any

from gpuwatch.model.process_sample import POD_LABELS

#: Extended resources the NVIDIA device plugin advertises: ``nvidia.com/gpu`` and, with MIG, ``nvidia.com/mig-*``.
RESOURCE_PREFIX = "nvidia.com/"


def _add(labels: dict[str, str], key: str, value: str) -> None:
    """A GPU shared by several containers (time-slicing) gets every holder, comma-separated, in order."""
    have = labels.get(key)
    if not have:
        labels[key] = value
    elif value not in have.split(","):
        labels[key] = f"{have},{value}"


def gpu_labels(response: Any) -> dict[str, dict[str, str]]:
    """device id -> {namespace, pod, container} for every NVIDIA device some container holds."""
    out: dict[str, dict[str, str]] = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                if not devices.resource_name.startswith(RESOURCE_PREFIX):
                    continue
                for device_id in devices.device_ids:
                    labels = out.setdefault(device_id, {})
                    for key, value in zip(POD_LABELS, (pod.namespace, pod.name, container.name), strict=True):
                        if value:
                            _add(labels, key, value)
    return out
