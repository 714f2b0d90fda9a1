"""GPU-seconds per sample interval: observed, allocated, busy and effective, and who held the GPU.

One interval runs from one Snapshot to the next and takes the newer Snapshot's values (NVML's GPU-Util
and GPM's SM activity are averages over the time since the last reading). For each GPU:

* **observed**: the interval's length (the GPU existed and was watched);
* **allocated**: the same, when a process holds the GPU (or GPU-Util/SM activity show someone runs there);
* **busy**: allocated x GPU-Util (the share of time some kernel ran);
* **effective**: allocated x SM activity, the share of the SMs that worked. Where no profiling backend
  gives SM activity (older GPUs, NVML without GPM), GPU-Util stands in, so effective equals busy there.
  Effective never exceeds busy, and busy never exceeds allocated.

The lost part is ``observed - effective``: ``observed - allocated`` lost because nobody held the GPU,
and ``allocated - effective`` lost while someone did, which the ledger gives the doctor's cause.
An interval longer than ``max_gap`` (the daemon was stopped, the sampler stalled) is not counted: nobody
saw what the GPU did then.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.efficiency.rows import NO_OWNER, Owner
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, Snapshot

__all__ = ["GpuInterval", "Owner", "intervals", "owner_of"]


def owner_of(p: ProcessSample | None, gpu: GpuSample) -> Owner:
    """The pod holding the process (or, with no process, the GPU), else the process's user and command."""
    if p is not None and p.pod:
        return Owner(p.namespace or "", p.pod, p.container or "")
    if gpu.labels.get("pod"):
        return Owner(gpu.labels.get("namespace", ""), gpu.labels["pod"], gpu.labels.get("container", ""))
    if p is None:
        return NO_OWNER
    return Owner(user=p.user or "", command=p.command)


def _pct(value: float | None) -> float | None:
    return None if value is None else max(0.0, min(100.0, float(value))) / 100.0


@dataclass(frozen=True, slots=True)
class GpuInterval:
    """One GPU over one sample interval, in seconds."""

    gpu: int
    end: float
    observed: float
    allocated: float
    busy: float
    effective: float
    #: Processes on the GPU at the interval's end (the owner is chosen from these).
    processes: tuple[ProcessSample, ...]
    #: Bytes of GPU memory in use (None: unknown).
    mem_used: int | None
    sample: GpuSample

    @property
    def lost(self) -> float:
        return max(0.0, self.observed - self.effective)

    @property
    def unallocated(self) -> float:
        return max(0.0, self.observed - self.allocated)

    def owner(self, pid: int | None = None) -> Owner:
        """The process ``pid`` (the doctor's finding names it), else the biggest GPU-memory holder."""
        chosen = next((p for p in self.processes if pid is not None and p.pid == pid), None)
        if chosen is None and self.processes:
            chosen = min(self.processes, key=lambda p: (-(p.gpu_memory_bytes or 0), p.pid))
        return owner_of(chosen, self.sample)


def intervals(prev: Snapshot, snap: Snapshot, max_gap: float) -> list[GpuInterval]:
    """The GPU intervals from ``prev`` to ``snap`` (none when the gap is longer than ``max_gap``, or the
    clock went backwards)."""
    dt = snap.time - prev.time
    if dt <= 0 or dt > max_gap:
        return []
    out = []
    for g in snap.gpus:
        if g.lost:
            out.append(GpuInterval(g.index, snap.time, dt, 0.0, 0.0, 0.0, (), None, g))
            continue
        util, sm = _pct(g.gpu_util), _pct(g.sm_active)
        busy_share = util if util is not None else (sm or 0.0)
        effective_share = min(sm if sm is not None else busy_share, busy_share)
        procs = snap.processes_on(g.index)
        held = bool(procs) or busy_share > 0 or (sm or 0.0) > 0
        allocated = dt if held else 0.0
        out.append(GpuInterval(g.index, snap.time, dt, allocated, allocated * busy_share,
                               allocated * effective_share, procs, g.mem_used_bytes, g))
    return out
