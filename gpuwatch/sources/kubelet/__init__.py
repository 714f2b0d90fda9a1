"""Kubernetes: which pod, namespace and container holds each GPU, from the kubelet's PodResources API."""

from gpuwatch.sources.kubelet.source import DEFAULT_SOCKET, KubeletSource, kubelet_source

__all__ = ["DEFAULT_SOCKET", "KubeletSource", "kubelet_source"]
