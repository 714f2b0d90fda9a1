"""``gpuwatch doctor``: watch for a while, then say why the GPU is under-used, ranked, with evidence and fixes."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from gpuwatch.cli.common import CliError, add_sampling_args, open_from_args, positive_float
from gpuwatch.doctor import diagnose
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.sampler import Sampler

COLOURS = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="watch for a while and explain what holds the GPU back",
                       description="Sample for --duration seconds (or read a recording), then print ranked "
                       "findings: what limits each GPU (the CPU side, copies, small kernels, FP32, memory "
                       "bandwidth, storage, throttling), the numbers that show it, and the fix to try.")
    p.add_argument("--duration", type=positive_float, default=None, metavar="S",
                   help="seconds to watch (default 10; with --replay: the whole recording)")
    p.add_argument("--pid", type=int, metavar="PID", help="diagnose only this process and the GPUs it uses")
    p.add_argument("--json", action="store_true", help='print {"source", "samples", "findings": [...]} as JSON')
    add_sampling_args(p)
    p.set_defaults(func=run)


def collect(sampler: Sampler, duration: float, interval: float, is_recording: bool,
            show_progress: bool) -> list[Snapshot]:
    """Snapshots for ``duration`` seconds: live at ``interval``; from a recording as fast as it reads,
    until its own clock has advanced ``duration`` seconds (or it ends)."""
    snaps: list[Snapshot] = []
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
            done = snap.time - snaps[0].time if is_recording else time.monotonic() - start
            progress.update(task, completed=min(done, duration), samples=len(snaps))
            if done >= duration:
                break
            if not is_recording:
                time.sleep(max(0.0, interval - (time.monotonic() - start - done)))
    return snaps


def render(findings: Sequence[Finding], description: str, samples: int, console: Console) -> None:
    console.print(f"[bold]gpuwatch doctor[/] - {description}, {samples} samples")
    if not findings:
        console.print("No findings: the GPUs were idle or had nothing to say.")
    for i, f in enumerate(findings, 1):
        where = ", ".join(x for x in (None if f.gpu_index is None else f"GPU {f.gpu_index}",
                                      None if f.pid is None else f"pid {f.pid}") if x)
        console.print(f"\n{i}. [{COLOURS[f.severity]}]{f.severity.upper()}[/] {f.title}"
                      + (f"  ({where})" if where else "") + f"  score {f.score:g}", highlight=False)
        for e in f.evidence:
            console.print(f"   - {e}", highlight=False)
        console.print(f"   fix: {f.fix}", highlight=False)


def run(args: argparse.Namespace) -> int:
    opened = open_from_args(args, allow_bundled=True)
    duration = args.duration if args.duration is not None else (float("inf") if opened.is_recording else 10.0)
    sampler = Sampler(opened.producer, interval=args.interval)
    try:
        snaps = collect(sampler, duration, args.interval, opened.is_recording,
                        show_progress=sys.stderr.isatty() and duration != float("inf"))
    finally:
        sampler.stop()
    if not snaps:
        raise CliError("no samples to diagnose (an empty recording?)", exit_code=2)
    findings = diagnose(snaps, pid=args.pid)
    if args.json:
        print(json.dumps({"source": opened.description, "samples": len(snaps),
                          "findings": [f.to_dict() for f in findings]}, indent=2))
    else:
        render(findings, opened.description, len(snaps), Console(highlight=False))
    return 0
