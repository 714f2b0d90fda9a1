"""Kubernetes: which pod, namespace and container holds each GPU, from the kubelet's PodResources API.

The source (:mod:`.source`) needs grpcio and protobuf, about 10 MiB of memory once imported, so nothing
here imports it: :func:`is_socket` tells first whether there is a kubelet to ask.
"""

from __future__ import annotations

import os
import stat


def is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False
