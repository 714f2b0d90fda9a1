"""A deterministic recording shaped like the incident (GPU-Util high-ish, SM activity low, memory 80 %),
for tests and screenshots until the bundled H200 recording is used. Values are a pure function of the
tick number, so every run and every machine draws the same screen."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import psutil

from gpuwatch.model.clock_events import decode
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.model.snapshot import GpuSample, HostSample, Profiling, Snapshot, SourceStatus

T0 = 1_796_205_600.0  # 2026-12-02 10:00:00 UTC
GIB = 2**30


def gpu(i: int, tick: int) -> GpuSample:
    wave = math.sin(tick / 9.0 + i)
    util = 12 + 6 * wave if tick < 60 else 46 + 10 * wave
    sm = util * (0.35 if tick < 60 else 0.7)
    mask = 0x4 if tick % 40 > 30 else (0x40 if i == 1 and tick % 50 > 45 else 0)
    return GpuSample(
        index=i, uuid=f"GPU-{i:08d}-synthetic", name="NVIDIA H200", pci_bus_id=f"00000000:{0x19 + i:02X}:00.0",
        driver_version="570.86.15", gpu_util=round(util, 1), mem_util=round(util / 3, 1),
        mem_used_bytes=int((112.0 + 4 * wave) * GIB), mem_total_bytes=int(140.4 * GIB),
        temperature_c=44 + 3 * wave, power_w=round(180 + 60 * wave, 1), power_limit_w=700.0,
        sm_clock_mhz=1980.0 if mask == 0 else 1755.0, sm_clock_max_mhz=1980.0, mem_clock_mhz=2619.0, pstate=0,
        clock_event_mask=mask, clock_events=decode(mask), pcie_link_gen=5, pcie_link_width=16,
        pcie_tx_bytes_s=2.1e8, pcie_rx_bytes_s=1.2e9,
        profiling={"gpm": Profiling(sm_active=round(sm, 1), sm_occupancy=round(sm * 0.5, 1),
                                    tensor_active=0.0 if tick < 60 else 22.0, dram_active=round(util / 4, 1),
                                    pcie_tx_bytes_s=2.1e8, pcie_rx_bytes_s=1.2e9)},
    )


def processes(i: int, tick: int, extra_pids: tuple[int, ...] = ()) -> list[ProcessSample]:
    out = []
    for n in range(3):
        pid = 4100 + 10 * i + n
        out.append(ProcessSample(
            pid=pid, gpu_index=i, gpu_memory_bytes=(36 - 8 * n) * GIB, sm_util=float(10 - 3 * n),
            ppid=4000 if n == 0 else 4100 + 10 * i, user="svc" if n != 2 else "alice",
            name="python3", cmdline=f"python3 serve.py --worker {n} --gpu {i}",
            cpu_percent=98.0 - 30 * n + (tick % 3), top_thread_cpu_percent=99.0 - 40 * n,
            num_threads=24, threads_in_io_wait=2 if n == 1 else 0, rss_bytes=(6 + n) * GIB,
            state="running" if n == 0 else "sleeping", io_read_bytes_s=3.2e7 if n == 1 else 0.0,
            io_write_bytes_s=0.0, create_time=T0 - 3600))
    for pid in extra_pids:  # the test's own processes carry their identity as the host source reads it
        name, cmdline, started = "sleep", "sleep 60", None
        with contextlib.suppress(psutil.NoSuchProcess):
            live = psutil.Process(pid)
            name, cmdline, started = live.name(), " ".join(live.cmdline()), live.create_time()
        out.append(ProcessSample(pid=pid, gpu_index=i, gpu_memory_bytes=GIB, sm_util=1.0, ppid=1, user="tester",
                                 name=name, cmdline=cmdline, cpu_percent=0.0, rss_bytes=2**20, state="sleeping",
                                 create_time=started))
    return out


def snapshot(tick: int, gpus: int = 1, extra_pids: tuple[int, ...] = (), host: str = "h200-node-1") -> Snapshot:
    return Snapshot(
        time=T0 + tick, seq=tick + 1,
        host=HostSample(hostname=host, cpu_count=32, cpu_percent=14.0, iowait_percent=3.0, load1=4.2,
                        mem_total_bytes=512 * GIB, mem_used_bytes=96 * GIB),
        gpus=tuple(gpu(i, tick) for i in range(gpus)),
        processes=tuple(p for i in range(gpus) for p in processes(i, tick, extra_pids)),
        sources=(SourceStatus("nvml"), SourceStatus("host")),
    )


def write_recording(path: Path, seconds: int = 120, gpus: int = 1) -> Path:
    header = RecordingHeader(created=T0, interval_s=1.0, hostname="h200-node-1",
                             description="synthetic incident-shaped trace for tests")
    with RecordingWriter(path, header) as w:
        for tick in range(seconds):
            w.write(snapshot(tick, gpus))
    return path
