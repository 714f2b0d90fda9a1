"""Kubernetes: which pod, namespace and container holds each GPU, from the kubelet's PodResources API.

The source needs grpcio and protobuf (about 10 MiB of memory once imported), so this package imports
them only when the source is asked for: :func:`is_socket` tells first whether there is a kubelet to ask.
"""

from __future__ import annotations

import os
import stat
from typing import Any

__all__ = ["DEFAULT_SOCKET", "KubeletSource", "is_socket", "kubelet_source"]


def is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def __getattr__(name: str) -> Any:
    if name in ("DEFAULT_SOCKET", "KubeletSource", "kubelet_source"):
        from gpuwatch.sources.kubelet import source

        return getattr(source, name)
    raise AttributeError(name)
