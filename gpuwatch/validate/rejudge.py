"""A finished validate run judged again by the current doctor, from its recording: the numbers stay the
run's own (GPU medians are recomputed from the same samples, so they come out equal), the findings and each
traffic phase's top finding become what the doctor says of those samples today."""

from __future__ import annotations

from collections.abc import Sequence

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.validate.runner import StageRun, diagnose_phases
from gpuwatch.validate.views import Validation


def rejudge_run(run: StageRun, snapshots: Sequence[Snapshot], settle_s: float) -> None:
    """One stage run's findings (and its phases' top findings) from the samples in its window."""
    if run.window is None:
        return
    start, end = run.window
    run.snapshots = [s for s in snapshots if start <= s.time <= end]
    if not run.snapshots:
        return
    pid = (run.workload or {}).get("pid")
    on_gpu = bool(pid) and any(p.pid == pid for s in run.snapshots for p in s.processes)
    run.findings = diagnose(run.snapshots, pid=pid if on_gpu else None)
    if run.recorded_row is not None:
        top = top_problem(run.findings)
        run.recorded_row = {**run.recorded_row, "top_finding": top.title if top else "-"}
    if (run.workload or {}).get("phases"):
        diagnose_phases(run, settle_s)


def rejudge(v: Validation, snapshots: Sequence[Snapshot], settle_s: float) -> int:
    """Every run of ``v`` judged again; returns how many runs had samples in the recording."""
    runs = [r for group in v.capacity.values() for r in group]
    runs += [r for by_stage in v.latency.values() for r in by_stage.values()]
    runs += list(v.traffic.values())
    for run in runs:
        rejudge_run(run, snapshots, settle_s)
    return sum(bool(r.snapshots) for r in runs)
