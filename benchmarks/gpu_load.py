"""Start and stop the GPU load the tick benchmark needs: several processes on the GPU, as on a serving box."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from benchmarks.procs import Started, start

WORKER = Path(__file__).with_name("load_worker.py")


def start_load(n: int, logdir: Path, seconds: float = 900.0, mib: int = 1024) -> list[Started]:
    return [start(f"gpu-load-{i}", [sys.executable, str(WORKER), str(seconds), str(mib)], logdir)
            for i in range(n)]


def wait_on_gpu(procs: list[Started], timeout_s: float = 120.0) -> list[int]:
    """Pids NVML lists as compute processes once all of ``procs`` are there; raises on timeout or a crash."""
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        want = {p.pid for p in procs}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [p for p in procs if not p.alive()]
            if dead:
                raise RuntimeError(f"GPU load process {dead[0].name} exited: {dead[0].log_tail()}")
            seen = {p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
            if want <= seen or len(seen) >= len(want):  # pids differ where NVML sees another pid namespace
                return sorted(seen)
            time.sleep(0.5)
        raise TimeoutError(f"only {len(want & seen)} of {len(want)} load processes appeared on GPU 0 "
                           f"within {timeout_s:g} s")
    finally:
        pynvml.nvmlShutdown()


def stop_load(procs: list[Started]) -> None:
    for p in procs:
        p.stop()
