"""The host-mechanism variants run for real on the CPU show the mechanism itself: full collections the program
never asked for, major page faults without reads, a log collector that is no descendant with a send queue that
does not drain, a gloo rank that is a child with CUDA hidden."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from tools import require_torch

torch = require_torch()

from gpuwatch.workload.config import READY_LINE  # noqa: E402
from gpuwatch.workload.fault_hidden import _session_cache, build_request_tree  # noqa: E402

pytestmark = pytest.mark.torch  # CI's second pass, with torch's CPU build


def test_the_gc_churn_gets_full_collections_nobody_asked_for() -> None:
    full: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    cache = _session_cache(500_000)  # noqa: F841 - the variant's live state
    recent: deque[object] = deque(maxlen=8)
    gc.callbacks.append(count)  # from the requests on: building the cache collects too
    try:
        for n in range(16):  # the variant's loop, as many requests on any machine
            tree, _ = build_request_tree(40_000, n)
            recent.append(tree)
    finally:
        gc.callbacks.remove(count)
    assert len(full) >= 1


def _started(fault: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "workload", "--fault", fault, "--device", "cpu",
                             "--duration", "8"], stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith(READY_LINE):
            return proc
    raise AssertionError(f"{fault} exited before it was ready: {proc.wait()}")


@pytest.fixture
def stop() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _majflt(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[9])


def _on_tmpfs(path: str) -> bool:
    mounts = [p for p in psutil.disk_partitions(all=True) if path.startswith(p.mountpoint)]
    return max(mounts, key=lambda p: len(p.mountpoint)).fstype == "tmpfs" if mounts else False


@pytest.mark.skipif(_on_tmpfs(os.environ.get("GPUWATCH_FAULT_DIR") or tempfile.gettempdir()),
                    reason="the fault's file is on tmpfs: its pages cannot be dropped")
def test_the_mapped_table_faults_its_pages_in_without_reading(stop: list[subprocess.Popen[str]]) -> None:
    stop.append(proc := _started("mmap_embedding_lookup"))
    io0, faults0 = psutil.Process(proc.pid).io_counters(), _majflt(proc.pid)
    time.sleep(1.5)
    io1, faults1 = psutil.Process(proc.pid).io_counters(), _majflt(proc.pid)
    assert faults1 - faults0 >= 100
    assert io1.read_chars - io0.read_chars < (faults1 - faults0) * 4096 // 10  # not read() calls


def _peer_of(pid: int) -> psutil.Process:
    gpu = psutil.Process(pid)
    remote = {c.raddr for c in gpu.net_connections(kind="tcp") if c.raddr}
    peers = {c.pid for c in psutil.net_connections(kind="tcp") if c.laddr in remote and c.pid not in (None, pid)}
    assert len(peers) == 1, peers
    return psutil.Process(peers.pop())


def test_the_log_collector_is_a_peer_and_the_send_queue_stays_full(stop: list[subprocess.Popen[str]]) -> None:
    stop.append(proc := _started("log_socket_backpressure"))
    peer = _peer_of(proc.pid)
    assert peer.pid not in {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
    assert "collector" in peer.cmdline()
    port = next(c.laddr.port for c in psutil.Process(proc.pid).net_connections(kind="tcp") if c.raddr)
    queued = []
    for _ in range(10):
        time.sleep(0.2)
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port:
                queued.append(int(fields[4].split(":")[0], 16))  # tx_queue: bytes sent, not yet read
    assert sum(q > 0 for q in queued) >= 8, queued  # the collector never catches up


def test_the_gloo_rank_is_a_child_with_no_gpu(stop: list[subprocess.Popen[str]]) -> None:
    stop.append(proc := _started("gloo_allreduce_grads"))
    (rank,) = [c for c in psutil.Process(proc.pid).children() if "--rank" in c.cmdline()]
    assert rank.environ().get("CUDA_VISIBLE_DEVICES") == ""
    assert rank.cpu_percent(interval=1.0) > 0
