"""Every mechanism variant is a real program: each runs briefly on the CPU (the GPU run records them), and the
feeders have the process tree they claim (children, or a peer that is no descendant)."""

from __future__ import annotations

import shutil
import subprocess

import psutil
import pytest
from tools import require_torch

from workload.running import started

torch = require_torch()

from gpuwatch.workload.faults import run_fault  # noqa: E402
from gpuwatch.workload.faults_catalogue import MECHANISM_FAULTS  # noqa: E402

pytestmark = pytest.mark.torch  # CI's second pass, with torch's CPU build

SLOW_ON_CPU = ("compile_shapes", "compile_per_request")  # inductor compiles C++ on the CPU: tens of seconds


@pytest.mark.parametrize("fault", [f for f in MECHANISM_FAULTS if f not in SLOW_ON_CPU])
def test_each_mechanism_variant_runs_on_the_cpu(fault: str) -> None:
    ready: list[bool] = []
    result = run_fault(fault, 0.5, lambda: ready.append(True), device="cpu")
    assert ready == [True] and result["loops"] >= 1 and result["fault"] == fault


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("g++") or shutil.which("clang++")),
                    reason="torch.compile on the CPU builds C++: no compiler here")
@pytest.mark.parametrize("fault", SLOW_ON_CPU)
def test_each_compile_variant_compiles_on_the_cpu(fault: str) -> None:
    result = run_fault(fault, 0.5, lambda: None, device="cpu")
    assert result["loops"] >= 1


def _started(fault: str) -> subprocess.Popen[str]:
    return started(fault, 6)


def test_the_storage_feeders_are_children_of_the_gpu_process(stop: list[subprocess.Popen[str]]) -> None:
    stop.append(proc := _started("feeder_fsync_procs"))
    children = [c for c in psutil.Process(proc.pid).children(recursive=True) if "resource_tracker" not in
                " ".join(c.cmdline())]
    assert len(children) == 3, [c.cmdline() for c in children]


def test_the_socket_peer_is_no_descendant_of_the_gpu_process(stop: list[subprocess.Popen[str]]) -> None:
    stop.append(proc := _started("feeder_socket_peer"))
    gpu = psutil.Process(proc.pid)
    (conn,) = [c for c in gpu.net_connections(kind="tcp") if c.status == psutil.CONN_ESTABLISHED]
    (peer,) = [c.pid for c in psutil.net_connections(kind="tcp") if c.laddr == conn.raddr]
    assert peer is not None and peer != gpu.pid
    assert peer not in {c.pid for c in gpu.children(recursive=True)}
    assert "--feeder" in psutil.Process(peer).cmdline()
