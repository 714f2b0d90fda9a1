"""Recordings the daemon replays for the scale and leak benchmarks, made with the fake NVML.

The fake's processes do not exist on this host, so the host source finds nothing for them; the host-side
details a real serving box would have (user, command line, CPU, threads, RSS, IO) are filled in here so
/metrics carries the labels and series it would carry in production.
"""

from __future__ import annotations

import dataclasses
import socket
import sys
import time
from pathlib import Path
from typing import Any

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sources.nvml import NvmlSource

TESTS = Path(__file__).resolve().parent.parent / "tests"


def fake_nvml(gpus: int, processes_per_gpu: int) -> Any:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from fakes.fake_pynvml import make_fake_nvml

    return make_fake_nvml(gpus=gpus, processes_per_gpu=processes_per_gpu)


def enrich(p: ProcessSample, k: int) -> ProcessSample:
    """Host-side details of a plausible inference worker."""
    return dataclasses.replace(
        p, ppid=1, user="svc-infer", name="python3", cmdline=f"python3 -m serve --port {8000 + k % 1000} --worker {k}",
        cpu_percent=float(20 + k % 80), top_thread_cpu_percent=float(15 + k % 85), top_thread_id=p.pid + 1,
        num_threads=24 + k % 40, threads_in_io_wait=k % 3, rss_bytes=(2 + k % 6) * 2**30, state="S",
        io_read_bytes_s=float(k % 7) * 2**20, io_write_bytes_s=float(k % 5) * 2**18,
        container_id=f"{k:064x}", create_time=1.7e9 + k)


def _header(description: str) -> RecordingHeader:
    return RecordingHeader(created=time.time(), interval_s=1.0, hostname=socket.gethostname(),
                           description=description, meta={"source": "fake NVML (tests/fakes/fake_pynvml.py)"})


def make_scale_recording(path: Path, gpus: int = 8, processes_per_gpu: int = 256, ticks: int = 5) -> int:
    """``ticks`` snapshots of ``gpus`` x ``processes_per_gpu``; returns the process count of one."""
    collector = LiveCollector([NvmlSource(nvml=fake_nvml(gpus, processes_per_gpu))])
    base = time.time() - ticks
    n = 0
    with RecordingWriter(path, _header(f"scale: {gpus} GPUs x {processes_per_gpu} processes")) as w:
        for i in range(ticks):
            snap = collector.collect()
            procs = tuple(enrich(p, k) for k, p in enumerate(snap.processes))
            n = len(procs)
            w.write(dataclasses.replace(snap, time=base + i, processes=procs))
    collector.close()
    return n


def _phase(fake: Any, i: int) -> None:
    """Moves the fake GPU through the incident's shapes so alerts pend, fire and resolve during replay:
    busy, then starved (low GPU-Util with memory held), then jittering memory."""
    gpu = fake.gpus[0]
    phase = (i // 100) % 3
    gpu.util_gpu = (95, 12, 60)[phase]
    gpu.mem_used_override = int(gpu.mem_total * (0.5, 0.8, 0.6 + 0.3 * ((i % 4) / 3))[phase])
    gpu.temperature = 40 + i % 45


def make_leak_recording(path: Path, ticks: int = 1000, churn_every: int = 10) -> int:
    """``ticks`` snapshots of 1 GPU x 4 processes where a process ends and a new pid starts every
    ``churn_every`` ticks (per-pid state that is never dropped then grows), and GPU values go through
    phases that make alerts change state. Returns the number of distinct pids."""
    fake = fake_nvml(1, 4)
    collector = LiveCollector([NvmlSource(nvml=fake)])
    base = time.time() - ticks
    next_pid = 20_000
    pids: set[int] = set()
    with RecordingWriter(path, _header(f"leak: {ticks} ticks, a new process every {churn_every} ticks")) as w:
        for i in range(ticks):
            if i and i % churn_every == 0:
                fake.gpus[0].processes[(i // churn_every) % 4].pid = next_pid
                next_pid += 1
            _phase(fake, i)
            snap: Snapshot = collector.collect()
            procs = tuple(enrich(p, p.pid) for p in snap.processes)
            pids.update(p.pid for p in procs)
            w.write(dataclasses.replace(snap, time=base + i, processes=procs, seq=i + 1))
    collector.close()
    return len(pids)
