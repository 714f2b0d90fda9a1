"""Synthetic recordings for the daemon's tests: the "GPU at 12 %" incident in miniature.

Phases (``n`` ticks, ``interval`` seconds apart): healthy serving, then starved (GPU-Util 12 %, SM
activity 8 %, memory 80 % full, the serving process's busiest thread at 100 % of a core: the GIL),
then healthy again. Real recordings replace this where one is available; these keep tests self-contained.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.model.snapshot import GpuSample, HostSample, Profiling, Snapshot, SourceStatus
from gpuwatch.notify import new_secret

T0 = 1_764_666_000.0
TOTAL = 150_754_820_096


def starved_at(i: int, n: int, recovers: bool = True) -> bool:
    return n // 4 <= i and (i < (3 * n) // 4 or not recovers)


def make_snapshot(i: int, n: int, interval: float = 1.0, gpus: int = 1, processes: int = 2,
                  recovers: bool = True) -> Snapshot:
    starved = starved_at(i, n, recovers)
    util, sm, thread = (12.0, 8.0, 100.0) if starved else (78.0, 71.0, 35.0)
    gpu_list = tuple(GpuSample(
        index=g, uuid=f"GPU-{g:08d}-1111-2222-3333-444444444444", name="NVIDIA H200",
        pci_bus_id=f"00000000:0{g}:00.0", driver_version="580.159.04", gpu_util=util, mem_util=9.0,
        mem_used_bytes=int(TOTAL * 0.8), mem_total_bytes=TOTAL, temperature_c=41.0 + i % 3, power_w=180.0,
        power_limit_w=700.0, energy_j=1000.0 + 180.0 * i * interval, sm_clock_mhz=1980.0,
        sm_clock_max_mhz=1980.0, mem_clock_mhz=3201.0, pstate=0, clock_event_mask=0x0,
        profiling={"gpm": Profiling(sm_active=sm, sm_occupancy=sm / 2, tensor_active=0.0 if starved else 40.0,
                                    dram_active=5.0)},
    ) for g in range(gpus))
    procs = tuple(ProcessSample(
        pid=4000 + p, gpu_index=p % gpus, gpu_memory_bytes=(40 - p) * 2**30, sm_util=util, user="svc",
        name="python3", cmdline=f"python3 serve.py --worker {p}", cpu_percent=thread + 5,
        top_thread_cpu_percent=thread if p == 0 else 20.0, num_threads=30, threads_in_io_wait=0,
    ) for p in range(processes))
    return Snapshot(time=T0 + i * interval, seq=i + 1, gpus=gpu_list, processes=procs,
                    host=HostSample(hostname="gpu-node-1", cpu_count=16, cpu_percent=20.0, iowait_percent=0.5,
                                    load1=2.0, mem_total_bytes=2**37, mem_used_bytes=2**35),
                    sources=(SourceStatus("nvml"), SourceStatus("host")))


def write_recording(path: Path, n: int = 120, interval: float = 1.0, gpus: int = 1, processes: int = 2,
                    recovers: bool = True) -> Path:
    header = RecordingHeader(created=T0, interval_s=interval, hostname="gpu-node-1",
                             description="synthetic GPU-starvation incident for tests")
    with RecordingWriter(path, header) as w:
        for i in range(n):
            w.write(make_snapshot(i, n, interval, gpus, processes, recovers))
    return path


#: Rules with short ``for`` so the incident fires within seconds of replay time.
TEST_RULES = """\
groups:
  - name: test
    rules:
      - alert: GpuStarved
        condition:
          all:
            - threshold: {metric: gpu.mem_used_percent, op: ">=", value: 70}
            - threshold: {metric: gpu.util, op: "<", value: 30}
        for: 10s
        labels: {severity: warning}
        annotations: {summary: "GPU {{ $labels.gpu }} holds memory but is idle"}
      - alert: ThreadCpuBound
        condition:
          all:
            - threshold: {metric: process.top_thread_cpu_percent, op: ">=", value: 90}
            - threshold: {metric: gpu.util, op: "<", value: 50}
        for: 10s
        labels: {severity: critical}
        annotations: {summary: "process {{ $labels.pid }} is CPU-bound"}
"""


def write_rules(path: Path) -> Path:
    path.write_text(TEST_RULES)
    return path


def write_config(tmp_path: Path, state: Path, receiver: Any, notify: str = "") -> Path:
    """A daemon config with the incident rules, ``state`` as its state directory and one signed generic
    receiver at ``receiver.url``, retrying fast (``notify``: more [notify] lines)."""
    (tmp_path / "secret").write_text(new_secret())
    config = tmp_path / "config.toml"
    config.write_text(f"""\
[alerts]
rule_paths = ["{write_rules(tmp_path / 'rules.yml')}"]
[daemon]
listen = "127.0.0.1:0"
state_dir = "{state}"
[notify]
initial_backoff = "200ms"
max_backoff = "1s"
{notify}
[[receivers]]
name = "ops"
kind = "generic"
url = "{receiver.url}"
secret_file = "{tmp_path / 'secret'}"
""")
    return config
