"""A synthetic trace shaped like the incident recording (scripts/incident_load.py): idle, then a memory
pool holding 75 % of the GPU while a naive server keeps GPU-Util near 3 %, then batched FP32 (busy, tensor
cores idle, low occupancy), then BF16, then idle. One snapshot per second, seeded noise."""

from __future__ import annotations

import random

from alerts.build import GIB, T0
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Profiling, Snapshot, SourceStatus

#: (phase, seconds)
PHASES = (("idle", 15), ("naive", 345), ("batched", 45), ("bf16", 45), ("idle", 15))


def phase_bounds() -> dict[str, tuple[float, float]]:
    """Seconds from the start of the trace where each (first) phase begins and ends."""
    out, t = {}, 0.0
    for name, length in PHASES:
        out.setdefault(name, (t, t + length))
        t += length
    return out


def incident_trace(seed: int = 7) -> list[Snapshot]:
    rng = random.Random(seed)
    snaps, t = [], 0
    held = False
    for name, length in PHASES:
        for _ in range(length):
            held = held or name == "naive"
            held = held and not (name == "idle" and t > 100)
            util, occ, tensor, sm, cpu = {
                "idle": (0.0, 0.0, 0.0, 0.0, 1.0), "naive": (rng.uniform(1, 6), 0.2, 0.0, 1.2, rng.uniform(97, 100)),
                "batched": (rng.uniform(97, 100), 18.5, 0.2, 95.5, 60.0),
                "bf16": (rng.uniform(94, 97), 51.5, 27.0, 87.0, 55.0)}[name]
            mem = 0.75 if held else 0.01
            gpu = GpuSample(index=0, uuid="GPU-6c1e", name="NVIDIA H200", gpu_util=round(util),
                            mem_used_bytes=int(mem * 141 * GIB) + rng.randrange(0, 2**20), mem_total_bytes=141 * GIB,
                            clock_event_mask=0x4 if name in ("batched", "bf16") else (0x1 if name == "idle" else 0),
                            profiling={"gpm": Profiling(sm_active=sm, sm_occupancy=occ, tensor_active=tensor)})
            procs = (ProcessSample(pid=4242, gpu_index=0, user="svc", name="python3", top_thread_cpu_percent=cpu),) \
                if name != "idle" else ()
            snaps.append(Snapshot(time=T0 + t, host=HostSample("h200-1"), gpus=(gpu,), processes=procs,
                                  sources=(SourceStatus("nvml"), SourceStatus("host")), origin="recording:test"))
            t += 1
    return snaps
