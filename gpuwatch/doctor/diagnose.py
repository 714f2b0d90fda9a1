"""``diagnose``: a window of Snapshots in, ranked Findings out (most severe and most costly first)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from gpuwatch.doctor import classes as table
from gpuwatch.doctor.rules_evidence import waits_on_producer, waits_on_python_threads
from gpuwatch.doctor.stack_window import ranked
from gpuwatch.doctor.verdict import verdict
from gpuwatch.doctor.window import GpuWindow, summarise
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.model.stacks import StackProfile


def _has_metrics(g: GpuWindow) -> bool:
    return any(v is not None for v in (g.util, g.sm_active, g.mem_used_percent, g.sm_clock_mhz))


#: Findings about a CPU thread: sampled stacks say what that thread does.
THREAD_FINDINGS = table.thread_findings()
#: Findings that say why a GPU waits: with one of them, an under-used GPU is explained.
EXPLAINS_IDLE = table.explains_idle()


def judge(g: GpuWindow, classes: Sequence[table.DoctorClass] = table.CLASSES) -> list[Finding]:
    """One GPU's findings, unranked: every rule, then the closing verdicts where their condition holds."""
    found = [f for rule in table.rules(classes) if (f := rule(g)) is not None]
    ruled_out = {b for f in found for b in table.excludes(classes).get(f.code, ())}
    found = [f for f in found if f.code not in ruled_out]
    if not any(f.code in table.explains_idle(classes) for f in found):
        found += [f for c in table.closing("unexplained", classes) if c.rule and (f := c.rule(g)) is not None]
    if all(f.severity == "info" for f in found):
        found += [f for c in table.closing("all_info", classes) if c.rule and (f := c.rule(g)) is not None]
    return [_with_stacks(f, g, table.thread_findings(classes), table.feeder_findings(classes),
                         table.producer_findings(classes)) for f in found]


def _with_stacks(f: Finding, g: GpuWindow, thread: frozenset[str], feeders: frozenset[str] = frozenset(),
                 producer: frozenset[str] = frozenset()) -> Finding:
    """A finding about a process whose stacks were sampled carries their mechanism and top code locations,
    and a thread finding quotes them; a finding that blames the feeders carries their code locations, and one
    about a GPU thread awaiting a producer thread of its own, the producer's."""
    p = next((q for q in g.processes if q.pid == f.pid), None)
    if p is None or p.stacks is None:
        return f
    line = p.stacks.line(f"{p.label}, feeding thread")
    evidence = f.evidence if f.code not in thread or any(line == e for e in f.evidence) else (*f.evidence, line)
    # the feeders' code: every bound feeder's samples pooled, its locations ranked by the time they took
    fed = ranked([x.stacks for x in p.feeders if x.bound is not None and x.stacks is not None]) \
        if f.code in feeders else None
    locations = (fed or p.stacks).top_locations()
    if f.code in producer and p.stacks.holders is not None and (waits_on_producer(p) or waits_on_python_threads(p)):
        locations = p.stacks.holders.working_locations()  # the producers' (or GIL holders') work keeps it waiting
    # a rule that read the mechanism off more than the frames (page faults under numpy frames) keeps its own
    # a finding that blames the feeders says what they do, not how the GPU thread waits for them
    return dataclasses.replace(f, mechanism=f.mechanism or (fed.mechanism if fed else None) or p.stacks.mechanism,
                               evidence=evidence,
                               locations=locations)


def diagnose(snapshots: Sequence[Snapshot], pid: int | None = None,
             stacks: Mapping[int, StackProfile] | None = None,
             classes: Sequence[table.DoctorClass] = table.CLASSES) -> list[Finding]:
    """Findings for every GPU in the window (only the GPUs ``pid`` runs on, and only that process's
    threads, when a pid is given), ranked. A GPU that is saturated and uses its tensor cores gets one
    ``healthy`` info finding and no warning. ``stacks`` (by pid, from ``--stacks``) add where a busy thread
    spends its time; ``classes``: the class table (a test adds a class to it)."""
    if not snapshots:
        return []
    windows = [g for g in summarise(snapshots, pid) if _has_metrics(g)]
    if not windows:
        return [_nothing_to_diagnose(snapshots, pid)]
    findings = [f for g in windows for f in judge(g, classes)]
    if stacks:
        thread = table.thread_findings(classes)
        findings = [dataclasses.replace(f, evidence=(*f.evidence, profile.evidence()))
                    if f.code in thread and f.pid is not None and (profile := stacks.get(f.pid)) else f
                    for f in findings]
    return sorted(findings, key=lambda f: f.rank_key)


def rules_out(found: Finding, other: Finding) -> bool:
    """``found`` about a GPU means the doctor would not report ``other`` about it: the idle breakdown is
    added only when no cause of idle time is found, and "healthy" only when nothing but infos are; each is
    said once per GPU."""
    spec = table.BY_CODE.get(other.code)
    if spec is not None and spec.closing is not None and found.code == other.code:
        return found.pid != other.pid  # one closing verdict per GPU: the newer one speaks
    if spec is not None and spec.closing == "unexplained":
        return found.code in EXPLAINS_IDLE
    if spec is not None and spec.closing == "all_info":
        return found.severity != "info"
    return False


def awaits_stacks(snapshots: Sequence[Snapshot], f: Finding) -> bool:
    """``f`` is about a thread judged from /proc alone while the stack sampler is on and has not sampled that
    process yet in the window: the stacks are about to settle it, and may say otherwise (a lock, not the
    GIL; children, not a wait off the CPU). The GPU-hour accounting holds such a verdict back, as it holds a
    missing one, so the seconds it charges go to the cause the evidence names."""
    if f.pid is None or f.code not in THREAD_FINDINGS or not snapshots:
        return False
    status = snapshots[-1].source("stacks")
    if status is None or status.state != "ok":
        return False  # no sampler, or one that cannot sample (no ptrace): /proc is all there will be
    return not any(st.pid == f.pid for s in snapshots for st in s.stacks)


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
