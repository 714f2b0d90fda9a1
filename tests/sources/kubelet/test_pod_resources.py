"""Pods on every GPU: the kubelet source against a real gRPC PodResources server on a unix socket.

The source asks the kubelet on its own thread and cadence; a tick only reads its last good answer. Errors,
slow answers and garbage leave each GPU with its last labels and the source marked stale.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.alerts.entities import Frame
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, Snapshot
from gpuwatch.runtime.build import SamplingOptions, _label_sources
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sources.base import Reading, Source
from gpuwatch.sources.kubelet.source import MAX_ANSWER_BYTES, KubeletSource
from sources.kubelet.server import PodResourcesServer, answer, wait_for

UUID0, UUID1, UUID2 = "GPU-aaaa", "GPU-bbbb", "GPU-cccc"
LLAMA = ("inference", "llama-70b-0", "vllm", [UUID0])


class TwoGpus(Source):
    """A GPU source that always sees three GPUs and one process on GPU 0."""

    name = "gpus"

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        return Reading(gpus=tuple(GpuSample(index=i, uuid=u) for i, u in enumerate((UUID0, UUID1, UUID2))),
                       processes=(ProcessSample(pid=42, gpu_index=0, gpu_memory_bytes=1 << 30),
                                  ProcessSample(pid=43, gpu_index=1, gpu_memory_bytes=1 << 30)))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PodResourcesServer]:
    s = PodResourcesServer(tmp_path / "kubelet.sock")
    yield s
    s.stop()


@pytest.fixture
def source(server: PodResourcesServer) -> Iterator[KubeletSource]:
    server.response = answer(LLAMA)
    src = KubeletSource(str(server.path), interval=0.2, timeout=0.3)
    wait_for(lambda: src.refreshes >= 1)
    yield src
    src.close()


def labels_of(snap: Snapshot, index: int) -> dict[str, str]:
    gpu = snap.gpu(index)
    assert gpu is not None
    return gpu.pod_labels()


def test_each_gpu_gets_the_pod_namespace_and_container_that_hold_it(server: PodResourcesServer) -> None:
    server.response = answer(LLAMA, ("train", "bert-1", "trainer", [UUID1]),
                             ("batch", "render-2", "worker", ["GPU-not-on-this-node"]))
    src = KubeletSource(str(server.path), interval=0.2, timeout=0.3)
    try:
        wait_for(lambda: src.refreshes >= 1)
        snap = LiveCollector([TwoGpus(), src]).collect()
    finally:
        src.close()
    assert labels_of(snap, 0) == {"namespace": "inference", "pod": "llama-70b-0", "container": "vllm"}
    assert labels_of(snap, 1) == {"namespace": "train", "pod": "bert-1", "container": "trainer"}
    assert labels_of(snap, 2) == {"namespace": "", "pod": "", "container": ""}
    assert [g.uuid for g in snap.gpus] == [UUID0, UUID1, UUID2]  # a device of another node adds no GPU
    by_pid = {p.pid: p for p in snap.processes}
    assert (by_pid[42].namespace, by_pid[42].pod, by_pid[42].container) == ("inference", "llama-70b-0", "vllm")
    assert snap.source("kubelet") is not None and snap.source("kubelet").state == "ok"  # type: ignore[union-attr]


def test_mig_devices_and_shared_gpus_are_labelled_and_other_resources_are_not(server: PodResourcesServer) -> None:
    mig = answer(("a", "p1", "c1", [UUID0]), resource="nvidia.com/mig-1g.18gb")
    shared = answer(("a", "p2", "c2", [UUID1]), ("b", "p3", "c3", [UUID1]))
    other = answer(("x", "nic", "c", [UUID2]), resource="example.com/nic")
    server.response = type(mig)(pod_resources=[*mig.pod_resources, *shared.pod_resources, *other.pod_resources])
    src = KubeletSource(str(server.path), interval=0.2, timeout=0.3)
    try:
        wait_for(lambda: src.refreshes >= 1)
        snap = LiveCollector([TwoGpus(), src]).collect()
    finally:
        src.close()
    assert labels_of(snap, 0)["pod"] == "p1"
    assert labels_of(snap, 1) == {"namespace": "a,b", "pod": "p2,p3", "container": "c2,c3"}
    assert labels_of(snap, 2)["pod"] == ""
    # two pods share GPU 1: its process cannot be told apart, so it gets no pod of its own
    assert next(p for p in snap.processes if p.pid == 43).pod is None


def test_pod_labels_reach_metrics_and_alerts(source: KubeletSource) -> None:
    snap = LiveCollector([TwoGpus(), source]).collect()
    body = render(Exporter(SnapshotCollector(lambda: snap)).registry).decode()
    fams = {f.name: f for f in text_string_to_metric_families(body)}
    gpu0 = next(s for s in fams["gpuwatch_gpu_info"].samples if s.labels["gpu"] == "0")
    assert (gpu0.labels["namespace"], gpu0.labels["pod"], gpu0.labels["container"]) == (
        "inference", "llama-70b-0", "vllm")
    proc = next(s for s in fams["gpuwatch_process_gpu_memory_bytes"].samples if s.labels["pid"] == "42")
    assert proc.labels["pod"] == "llama-70b-0"
    frame = Frame(snap, snap.time)
    assert frame.labels(("gpu", UUID0))["pod"] == "llama-70b-0"
    assert "pod" not in frame.labels(("gpu", UUID2))  # no empty labels on alerts off Kubernetes


def test_an_error_keeps_the_last_labels_and_marks_the_source_stale(server: PodResourcesServer,
                                                                   source: KubeletSource) -> None:
    collector = LiveCollector([TwoGpus(), source])
    server.fail = "kubelet restarting"
    wait_for(lambda: source.failures >= 1)
    snap = collector.collect()
    assert labels_of(snap, 0)["pod"] == "llama-70b-0"
    status = snap.source("kubelet")
    assert status is not None and status.state == "stale" and "kubelet restarting" in (status.message or "")
    server.fail = None
    server.response = answer(("inference", "llama-70b-1", "vllm", [UUID0]))
    wait_for(lambda: collector.collect().source("kubelet").state == "ok")  # type: ignore[union-attr]
    assert labels_of(collector.collect(), 0)["pod"] == "llama-70b-1"


def test_a_slow_kubelet_never_slows_a_tick(server: PodResourcesServer, source: KubeletSource) -> None:
    collector = LiveCollector([TwoGpus(), source])
    server.delay = 1.0  # past the source's 0.3 s deadline
    wait_for(lambda: source.failures >= 1, timeout=5)
    started = time.monotonic()
    snap = collector.collect()
    assert time.monotonic() - started < 0.2
    assert labels_of(snap, 0)["pod"] == "llama-70b-0"
    assert "DEADLINE_EXCEEDED" in (snap.source("kubelet").message or "")  # type: ignore[union-attr]


def test_garbage_on_the_wire_keeps_the_last_labels(server: PodResourcesServer, source: KubeletSource) -> None:
    server.garbage = b"\xff\xff\xff\xff not a protobuf message"
    wait_for(lambda: source.failures >= 1)
    snap = LiveCollector([TwoGpus(), source]).collect()
    assert labels_of(snap, 0)["pod"] == "llama-70b-0"
    assert snap.source("kubelet").state == "stale"  # type: ignore[union-attr]


def test_a_vanished_kubelet_is_asked_once_per_interval_not_in_a_storm(server: PodResourcesServer,
                                                                     source: KubeletSource) -> None:
    server.stop()
    wait_for(lambda: source.failures >= 1)
    before = source.failures
    time.sleep(1.0)
    assert source.failures - before <= 6  # interval 0.2 s: about five tries a second, never a tight loop
    assert labels_of(LiveCollector([TwoGpus(), source]).collect(), 0)["pod"] == "llama-70b-0"


def test_no_socket_means_no_source_and_one_info_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gpuwatch"):
        assert _label_sources(SamplingOptions(interval=1.0, kubelet_socket=str(tmp_path / "absent.sock"))) == []
    lines = [r for r in caplog.records if "kubelet" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert "pod labels are off" in lines[0].getMessage()


def test_without_a_kubelet_socket_grpc_and_protobuf_are_never_imported(tmp_path: Path) -> None:
    # about 10 MiB of a daemon's memory on a machine that is not a Kubernetes node
    absent = str(tmp_path / "no.sock")
    code = ("import sys\nfrom gpuwatch.runtime.build import SamplingOptions, _label_sources\n"
            f"assert _label_sources(SamplingOptions(interval=1.0, kubelet_socket={absent!r})) == []\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'google')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_outage_is_logged_once_and_its_end_once(server: PodResourcesServer, source: KubeletSource,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gpuwatch"):
        server.fail = "kubelet restarting"
        wait_for(lambda: source.failures >= 3)
        server.fail = None
        refreshed = source.refreshes
        wait_for(lambda: source.refreshes > refreshed)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("kubelet restarting" in m for m in messages) == 1
    assert sum("answers again" in m for m in messages) == 1


def test_an_answer_past_the_size_limit_is_refused_and_the_last_labels_kept(server: PodResourcesServer,
                                                                           source: KubeletSource) -> None:
    server.garbage = b"\x0a" * (MAX_ANSWER_BYTES + 1024)  # a kubelet that sends more than any node holds
    wait_for(lambda: source.failures >= 1)
    snap = LiveCollector([TwoGpus(), source]).collect()
    assert labels_of(snap, 0)["pod"] == "llama-70b-0"
    status = snap.source("kubelet")
    assert status is not None and status.state == "stale"
    assert "RESOURCE_EXHAUSTED" in (status.message or "") or "larger than max" in (status.message or "")
