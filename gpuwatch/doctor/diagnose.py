"""``diagnose``: a window of Snapshots in, ranked Findings out (most severe and most costly first)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from gpuwatch.doctor.rules import RULES
from gpuwatch.doctor.rules_gpu import healthy
from gpuwatch.doctor.rules_threads import EXPLAINS_IDLE, unexplained_underuse
from gpuwatch.doctor.verdict import verdict
from gpuwatch.doctor.window import GpuWindow, summarise
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.model.stacks import StackProfile


def _has_metrics(g: GpuWindow) -> bool:
    return any(v is not None for v in (g.util, g.sm_active, g.mem_used_percent, g.sm_clock_mhz))


#: Findings about a CPU thread: sampled stacks say what that thread does.
THREAD_FINDINGS = frozenset({"input_cpu_bound", "launch_bound", "h2d_copies", "d2h_copies", "off_cpu_wait",
                             "dataloader_bound", "gil_contention", "host_cpu_contention", "demand_bound",
                             "unexplained_underuse"})


def diagnose(snapshots: Sequence[Snapshot], pid: int | None = None,
             stacks: Mapping[int, StackProfile] | None = None) -> list[Finding]:
    """Findings for every GPU in the window (only the GPUs ``pid`` runs on, and only that process's
    threads, when a pid is given), ranked. A GPU that is saturated and uses its tensor cores gets one
    ``healthy`` info finding and no warning. ``stacks`` (by pid) add where a busy thread spends its time."""
    if not snapshots:
        return []
    windows = [g for g in summarise(snapshots, pid) if _has_metrics(g)]
    if not windows:
        return [_nothing_to_diagnose(snapshots, pid)]
    findings: list[Finding] = []
    for g in windows:
        found = [f for rule in RULES if (f := rule(g)) is not None]
        if any(f.code == "memory_leak" for f in found):  # a leaking process is not idle
            found = [f for f in found if f.code != "memory_idle"]
        if (lost := unexplained_underuse(g, found)) is not None:
            found.append(lost)
        if all(f.severity == "info" for f in found):
            ok = healthy(g)
            if ok is not None:
                found.append(ok)
        findings.extend(found)
    if stacks:
        findings = [dataclasses.replace(f, evidence=(*f.evidence, profile.evidence()))
                    if f.code in THREAD_FINDINGS and f.pid is not None and (profile := stacks.get(f.pid)) else f
                    for f in findings]
    return sorted(findings, key=lambda f: f.rank_key)


def rules_out(found: Finding, other: Finding) -> bool:
    """``found`` about a GPU means the doctor would not report ``other`` about it: "no known cause fits"
    is added only when no cause of idle time is found, and "healthy" only when nothing but infos are."""
    if other.code == "unexplained_underuse":
        return found.code in EXPLAINS_IDLE
    if other.code == "healthy":
        return found.severity != "info"
    return False


def top_problem(findings: Sequence[Finding]) -> Finding | None:
    """The finding to act on first, about any GPU (:func:`~gpuwatch.doctor.verdict.verdict`)."""
    return verdict(findings)


def _nothing_to_diagnose(snapshots: Sequence[Snapshot], pid: int | None) -> Finding:
    n = len(snapshots)
    if pid is not None and any(s.gpus for s in snapshots):
        return Finding("pid_not_on_gpu", f"Process {pid} was not seen on any GPU", "info", 0.0, None, pid,
                       (f"{n} samples", "GPU processes seen: " + (", ".join(sorted(
                           {str(p.pid) for s in snapshots for p in s.processes})) or "none")),
                       "Check the pid (inside a container NVML may report host pids), or run without --pid.")
    return Finding("no_gpu_data", "No GPU metrics in the window", "info", 0.0, None, pid,
                   (f"{n} samples", "sources: " + ", ".join(f"{s.name}={s.state}" for s in snapshots[-1].sources)),
                   "Run on a machine with an NVIDIA driver, point gpuwatch at a dcgm-exporter with --dcgm URL, "
                   "or diagnose a recording with --replay FILE.")
