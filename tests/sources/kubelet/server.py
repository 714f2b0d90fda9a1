"""A real gRPC PodResources server on a unix socket, serving the List answers a test sets."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from gpuwatch.sources.kubelet import api

Pod = tuple[str, str, str, list[str]]  # namespace, pod, container, GPU device ids


def answer(*pods: Pod, resource: str = "nvidia.com/gpu") -> Any:
    """A ListPodResourcesResponse with one container per entry holding the given devices."""
    return api.ListPodResourcesResponse(pod_resources=[
        api.PodResources(namespace=ns, name=pod, containers=[api.ContainerResources(name=container, devices=[
            api.ContainerDevices(resource_name=resource, device_ids=ids)])])
        for ns, pod, container, ids in pods])


class PodResourcesServer:
    """Serves ``v1.PodResourcesLister/List``; ``behave`` decides each answer: a response, an exception
    (aborts with UNAVAILABLE), raw bytes (garbage on the wire) or a delay first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.response: Any = answer()
        self.delay = 0.0
        self.garbage: bytes | None = None
        self.fail: str | None = None
        self.calls = 0
        self._lock = threading.Lock()
        handler = grpc.unary_unary_rpc_method_handler(
            self._list, request_deserializer=api.ListPodResourcesRequest.FromString,
            response_serializer=self._serialize)
        self.server = grpc.server(ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(api.SERVICE, {"List": handler}),))
        self.server.add_insecure_port(f"unix://{path}")
        self.server.start()

    def _serialize(self, message: Any) -> bytes:
        return self.garbage if self.garbage is not None else bytes(message.SerializeToString())

    def _list(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, self.fail)
        return self.response

    def stop(self) -> None:
        self.server.stop(grace=None).wait(5)


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")
