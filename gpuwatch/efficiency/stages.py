"""Cut a ``gpuwatch validate`` recording into one run per stage, so each can be compared with the next.

The validate recording holds every stage one after the other; each ran as its own process
(``gpuwatch workload --stage NAME [--rate R]``), so a run is the snapshots in which that process held the
GPU. Its workload numbers (req/s, p50, p99) come from validate's details file, matched by pid.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.model.snapshot import Snapshot

_STAGE = re.compile(r"--stage\s+(\S+)")
_RATE = re.compile(r"--rate\s+(\S+)")


@dataclass(frozen=True)
class StageRun:
    stage: str
    #: Offered rate (req/s) of an open-loop run; None for a capacity (full load) run.
    rate: float | None
    pid: int
    snapshots: list[Snapshot]
    workload: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.stage if self.rate is None else f"{self.stage}@{self.rate:g}"


def _workloads(details: dict[str, Any] | None) -> dict[int, dict[str, Any]]:
    if not details:
        return {}
    runs = [*details.get("capacity", []), *(r for rs in details.get("latency", {}).values() for r in rs)]
    return {int(r["workload"]["pid"]): dict(r["workload"]) for r in runs if r.get("workload", {}).get("pid")}


def cut_stages(snapshots: Sequence[Snapshot], details: dict[str, Any] | None = None) -> list[StageRun]:
    """The stage runs of a validate recording, in the order they ran."""
    found: dict[int, StageRun] = {}
    numbers = _workloads(details)
    for snap in snapshots:
        for p in snap.processes:
            stage = _STAGE.search(p.cmdline or "")
            if stage is None:
                continue
            if p.pid not in found:
                rate = _RATE.search(p.cmdline or "")
                found[p.pid] = StageRun(stage.group(1), float(rate.group(1)) if rate else None, p.pid, [],
                                        numbers.get(p.pid, {}))
            if not found[p.pid].snapshots or found[p.pid].snapshots[-1] is not snap:
                found[p.pid].snapshots.append(snap)
    return list(found.values())


#: What each step of the reference workload sets out to improve, judged at the same offered load: parallel
#: preprocessing serves the load (throughput), batching cuts the queueing tail (p99), CUDA graphs cut the
#: launch overhead of every batch (p50), BF16 puts the tensor cores to work (tensor activity).
STEP_TARGETS = {"workers": "req_per_s", "batched": "p99_ms", "compiled": "p50_ms", "bf16": "tensor_active"}


def at_rate(runs: Sequence[StageRun], rate: float | None) -> list[StageRun]:
    """The runs at one offered rate (None: the full-load capacity runs, the last of repeated ones), in order."""
    chosen: dict[str, StageRun] = {}
    for run in runs:
        if run.rate == rate:
            chosen.pop(run.stage, None)
            chosen[run.stage] = run
    return list(chosen.values())


def write_run(run: StageRun, path: Path, source: str, interval_s: float = 1.0) -> None:
    """``run`` as a recording of its own, its workload numbers in the header's meta (what compare reads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = RecordingHeader(created=run.snapshots[0].time if run.snapshots else 0.0, interval_s=interval_s,
                             hostname=run.snapshots[0].host.hostname if run.snapshots else "",
                             description=f"stage {run.name} (pid {run.pid}) cut from {source}",
                             meta={"stage": run.stage, "rate": run.rate, "workload": run.workload})
    with RecordingWriter(path, header) as writer:
        for snap in run.snapshots:
            writer.write(snap)
