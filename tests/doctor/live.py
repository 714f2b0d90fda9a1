"""The doctor on a real process's host evidence: the host source polled as the sampler does, each reading put
on a made-up idle GPU that the process holds (there is no GPU here: what the doctor must decide from is the
process's threads, sockets and feeders, which are real)."""

from __future__ import annotations

import dataclasses
import time

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, Profiling, Snapshot
from gpuwatch.sources.host import HostSource

#: An H200 at 5 % GPU-Util and 4 % SM activity, 2 GiB of it held by the process.
IDLE_GPU = GpuSample(index=0, uuid="GPU-2ef31ce1-54e1-f5dd-f3c9-bdcccda00fcc", name="NVIDIA H200", gpu_util=5.0,
                     mem_used_bytes=2 << 30, mem_total_bytes=150_754_820_096,
                     profiling={"gpm": Profiling(sm_active=4.0, sm_occupancy=2.0, tensor_active=0.0, dram_active=0.0)})


def on_idle_gpu(pid: int, polls: int = 8, every_s: float = 0.5) -> list[Snapshot]:
    """``polls`` Snapshots of ``pid`` on :data:`IDLE_GPU`, its host fields and feeders read live (the first
    poll only gives the rates a baseline)."""
    source = HostSource()
    snaps: list[Snapshot] = []
    for seq in range(polls + 1):
        reading = source.poll(0.0, [pid])
        if seq:
            proc = dataclasses.replace(ProcessSample(pid=pid, gpu_index=0, gpu_memory_bytes=2 << 30, sm_util=5.0),
                                       **reading.process_details[pid])
            snaps.append(Snapshot(time=time.time(), host=reading.host or snaps[-1].host, gpus=(IDLE_GPU,),
                                  processes=(proc,), feeders=reading.feeders, seq=seq))
        time.sleep(every_s)
    return snaps
