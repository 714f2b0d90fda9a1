"""The kubelet source: which pod holds each GPU, refreshed on its own cadence, never in the sampler's way.

A background thread calls ``List`` on the kubelet's PodResources socket every ``interval`` seconds, with a
deadline. :meth:`KubeletSource.poll` only hands over the last good answer, so a slow or dead kubelet never
delays a tick. When a refresh fails (socket gone, deadline passed, an answer that does not parse) the GPUs
keep the labels of the last good answer and the source reports ``stale`` with the reason; the next try
waits a full interval, so a broken kubelet sees one call per interval, not a retry storm.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import grpc

from gpuwatch.sources.base import Reading, Source
from gpuwatch.sources.kubelet import api
from gpuwatch.sources.kubelet.labels import gpu_labels

log = logging.getLogger(__name__)

#: Where the kubelet serves PodResources on every node (mounted into the DaemonSet's pod).
DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
#: The largest answer read (gRPC refuses a bigger message with RESOURCE_EXHAUSTED, before it is held): a
#: node's pods and devices are far below it, and a kubelet that sends more must not fill our memory.
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # gRPC's default, said here so it cannot change under us


class KubeletSource(Source):
    """Pod, namespace and container of each GPU (by UUID) from the kubelet's PodResources API v1."""

    name = "kubelet"
    role = "labels"
    deadline_s = 0.5

    def __init__(self, socket_path: str = DEFAULT_SOCKET, interval: float = 10.0, timeout: float = 5.0) -> None:
        self.socket_path = socket_path
        self.interval = interval
        self.timeout = timeout
        self._channel = grpc.insecure_channel(f"unix://{socket_path}",
                                              options=[("grpc.max_receive_message_length", MAX_ANSWER_BYTES)])
        self._list = self._channel.unary_unary(api.LIST_METHOD,
                                               request_serializer=api.ListPodResourcesRequest.SerializeToString,
                                               response_deserializer=api.ListPodResourcesResponse.FromString)
        self._request = api.ListPodResourcesRequest()
        self._lock = threading.Lock()
        self._labels: dict[str, dict[str, str]] = {}
        self._problem: str | None = "no answer from the kubelet yet"
        self._warned = False  # one warning per outage, one info line when it ends
        self.refreshes = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpuwatch-kubelet", daemon=True)
        self._thread.start()

    def refresh(self) -> bool:
        """One ``List`` call; True when it brought a good answer."""
        try:
            response = self._list(self._request, timeout=self.timeout)
            labels = gpu_labels(response)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            self._failed(f"{getattr(code, 'name', 'error')}: {details}")
            return False
        except (ValueError, AttributeError) as exc:  # an answer of the wrong shape
            self._failed(f"unreadable answer: {exc}")
            return False
        with self._lock:
            self._labels, self._problem = labels, None
            self.refreshes += 1
        if self._warned:
            self._warned = False
            log.info("kubelet %s answers again: pod labels are current", self.socket_path)
        return True

    def _failed(self, why: str) -> None:
        with self._lock:
            self._problem = f"kubelet {self.socket_path}: {why}; keeping the last pod labels"
            self.failures += 1
        if not self._warned:
            self._warned = True
            log.warning("%s", self._problem)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.refresh()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        with self._lock:
            return Reading(gpu_labels={k: dict(v) for k, v in self._labels.items()}, stale=self._problem)

    def close(self) -> None:
        self._stop.set()
        self._channel.close()
        self._thread.join(timeout=self.timeout + 1.0)
