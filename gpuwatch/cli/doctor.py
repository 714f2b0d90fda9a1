"""``gpuwatch doctor``: watch for a while, then say why the GPU is under-used, ranked, with evidence and fixes."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import deque
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from gpuwatch.cli.common import CliError, add_sampling_args, options_from_args, positive_float
from gpuwatch.diagnosis import SharedDiagnosis
from gpuwatch.doctor import LIVE_WINDOW_S, diagnose
from gpuwatch.doctor.groups import group_findings
from gpuwatch.model.finding import Finding
from gpuwatch.model.interval import DOCTOR_INTERVAL_S
from gpuwatch.model.recording import RecordingError
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.model.stack_profile import stack_profiles
from gpuwatch.model.visible import visible, visible_fields
from gpuwatch.runtime.build import NoGpuError, open_sampler
from gpuwatch.sampler.sampler import Sampler
from gpuwatch.sources.stack_source import DOCTOR_EVERY_S

COLOURS = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
#: At most this many samples are judged (the newest), whatever the recording's length: memory stays bounded.
MAX_SAMPLES = 3600


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="watch for a while and explain what holds the GPU back",
                       description="Sample for --duration seconds (or read a recording once), then print ranked "
                       "findings: what limits each GPU (Python in the feeding thread, kernel launches, "
                       "pageable copies, loader workers, storage or network waits, memory leaks and churn, "
                       "FP32 without tensor cores, DRAM bandwidth, throttling, idle memory, time-slicing), "
                       "the numbers that show it, and the fix to try. Without an NVIDIA driver it reads the "
                       "bundled H200 recording once.")
    p.add_argument("--duration", type=positive_float, default=None, metavar="S",
                   help=f"seconds to watch (default {LIVE_WINDOW_S:g}; with a recording: all of it, at most the "
                   f"newest {MAX_SAMPLES} samples)")
    p.add_argument("--pid", type=int, metavar="PID", help="diagnose only this process and the GPUs it uses")
    p.add_argument("--stacks", action="store_true",
                   help="name the functions the feeding threads spend their time in, from their sampled stacks "
                   "(py-spy samples them by default where it is installed and ptrace is permitted; a recording "
                   "made with stacks carries them)")
    p.add_argument("--json", action="store_true", help='print {"source", "samples", "findings": [...]} as JSON')
    add_sampling_args(p, interval=DOCTOR_INTERVAL_S)
    p.set_defaults(func=run)


def collect(sampler: Sampler, duration: float, interval: float, is_recording: bool,
            show_progress: bool) -> tuple[list[Snapshot], int]:
    """The newest snapshots (at most MAX_SAMPLES) of ``duration`` seconds, and how many were read: live at
    ``interval``; from a recording as fast as it reads, until its clock has advanced ``duration`` (or it ends)."""
    snaps: deque[Snapshot] = deque(maxlen=MAX_SAMPLES)
    read = 0
    first: float | None = None
    progress = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                        TextColumn("{task.fields[samples]} samples"), TimeRemainingColumn(),
                        console=Console(stderr=True), transient=True, disable=not show_progress)
    with progress:
        task = progress.add_task("watching" if not is_recording else "reading", total=duration, samples=0)
        start = time.monotonic()
        while True:
            snap = sampler.tick()
            if snap is None:
                break
            snaps.append(snap)
            read += 1
            first = snap.time if first is None else first
            done = snap.time - first if is_recording else time.monotonic() - start
            progress.update(task, completed=min(done, duration), samples=read)
            if done >= duration:
                break
            if not is_recording:
                time.sleep(max(0.0, interval - (time.monotonic() - start - done)))
    return list(snaps), read


def judge(snaps: list[Snapshot], pid: int | None, stacks: bool) -> list[Finding]:
    """The daemon's path: one shared live-doctor evaluation of the window collected (so a finding reads the
    same here, on /metrics and in the API). ``--stacks`` adds the sampled stacks' dominant frames as
    evidence, which only the doctor's full pass reads."""
    if stacks:
        return diagnose(snaps, pid=pid, stacks=stack_profiles(snaps))
    span = snaps[-1].time - snaps[0].time
    evaluation = SharedDiagnosis(lambda: snaps, window_s=span).ask(span, pid)
    if evaluation.findings is None:
        raise CliError(evaluation.note)
    return list(evaluation.findings)


def _say_stacks(snaps: list[Snapshot], is_recording: bool) -> None:
    """Once, on stderr: why ``--stacks`` has nothing to add (py-spy missing, ptrace refused, none recorded)."""
    if any(s.stacks for s in snaps):
        return
    status = next((st for s in reversed(snaps) if (st := s.source("stacks")) is not None and st.message), None)
    if status is not None:
        print(status.message, file=sys.stderr)
    elif is_recording:
        print("--stacks: this recording carries no sampled stacks; carrying on without them", file=sys.stderr)
    else:
        print("--stacks: no stacks were sampled (no GPU was under-used, or the window was shorter than one "
              "sampling window); carrying on without them", file=sys.stderr)


def render(findings: Sequence[Finding], description: str, samples: int, console: Console) -> None:
    """Ranked findings; the same finding on several GPUs is said once ("GPUs 0, 2, 3: ..."), its numbers
    as ranges over those GPUs."""
    # Findings quote process names and command lines: control characters made visible, and markup
    # escaped (a process named "[/]" must not break the page, nor "[bold]" restyle it).
    findings = visible_fields(list(findings))
    console.print(f"[bold]gpuwatch doctor[/] - {escape(visible(description))}, {samples} samples")
    if not findings:
        console.print("No findings: no GPU metrics to judge.")
    for i, group in enumerate(group_findings(findings), 1):
        f, where = group.finding, group.where()
        lead = f"{where.pop(0)}: " if len(group.gpus) > 1 else ""
        console.print(f"\n{i}. [{COLOURS[f.severity]}]{f.severity.upper()}[/] {escape(lead + f.title)}"
                      + escape(f"  ({', '.join(where)})" if where else "") + f"  score {f.score:g}", highlight=False)
        for e in f.evidence:
            console.print(f"   - {e}", highlight=False, markup=False)
        console.print(f"   fix: {f.fix}", highlight=False, markup=False)


def run(args: argparse.Namespace) -> int:
    if args.loop and args.duration is None:
        raise CliError("doctor reads a recording once: with --loop it would never end; drop --loop, or give "
                       "--duration S to judge S seconds of the looped recording", exit_code=2)
    opts = dataclasses.replace(options_from_args(args, allow_bundled=True), loop_bundled=False,
                               stacks_every_s=DOCTOR_EVERY_S)  # watching on purpose: stack windows back to back
    if args.stacks:
        opts.stacks = True
    try:
        opened = open_sampler(opts)
    except (NoGpuError, RecordingError) as exc:
        raise CliError(str(exc), exit_code=2) from None
    duration = args.duration if args.duration is not None else (float("inf") if opened.is_recording else LIVE_WINDOW_S)
    sampler = opened.sampler
    try:
        snaps, read = collect(sampler, duration, args.interval, opened.is_recording,
                              sys.stderr.isatty() and duration != float("inf"))
    finally:
        sampler.stop()
    if not snaps:
        raise CliError("no samples to diagnose (an empty recording?)", exit_code=2)
    if args.stacks:
        _say_stacks(snaps, opened.is_recording)
    findings = judge(snaps, args.pid, args.stacks)
    description = opened.description + (f" (the newest {len(snaps)} of {read} samples)" if read > len(snaps) else "")
    if args.json:
        print(json.dumps({"source": description, "samples": len(snaps),
                          "findings": [f.to_dict() for f in findings]}, indent=2))
    else:  # soft_wrap: piped into a file or a pager, lines stay whole (a terminal wraps them itself)
        render(findings, description, len(snaps), Console(highlight=False, soft_wrap=True))
    missing = next((f for f in findings if f.code == "pid_not_on_gpu"), None)
    if args.pid is not None and missing is not None:
        seen = next((e for e in missing.evidence if e.startswith("GPU processes seen")), "")
        raise CliError(f"process {args.pid} was not seen on any GPU in {len(snaps)} samples ({seen}); check "
                       "the pid (inside a container NVML may report host pids), or run without --pid")
    return 0
