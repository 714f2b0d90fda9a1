"""``gpuwatch validate --doctor``: inject every fault class under the live sampler, one recording each, and
write the doctor's confusion table; with ``--from-recordings``, judge recordings already made again.

The doctor is judged on real signals and at the interval ``gpuwatch doctor`` uses live, and the recordings
it writes are the doctor's test fixtures, so a rule can be changed and judged again without a GPU."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from gpuwatch.cli.common import CliError
from gpuwatch.cli.validate_options import check_torch, open_sampling, parse_faults
from gpuwatch.doctor import top_problem
from gpuwatch.model import files
from gpuwatch.model.interval import DOCTOR_INTERVAL_S
from gpuwatch.sources.stack_source import DOCTOR_EVERY_S as DOCTOR_STACKS_EVERY_S
from gpuwatch.validate.doctor_accuracy import FaultRun, judge_recordings, run_fault, write_recording, write_report


def rejudge(args: argparse.Namespace) -> int:
    """The confusion table from recordings already made, judged by the current doctor."""
    folder: Path = args.from_recordings
    if not folder.is_dir():
        raise CliError(f"{folder}: not a folder of fault recordings (written by gpuwatch validate --doctor)")
    runs = judge_recordings(folder, args.window)
    first = next((r.snapshots[0] for r in runs if r.snapshots), None)
    old = _old_meta(args.out / "doctor-accuracy.json")
    meta = {**old, "window_s": args.window, "gpu": old.get("gpu") or (first.gpus[0].name if first and first.gpus
                                                                       else "none")}
    paths = write_report(args.out, runs, meta)
    print(f"wrote {paths['json']} and {paths['markdown']} from {len(runs)} recordings in {folder}", file=sys.stderr)
    return 0


def run_doctor(args: argparse.Namespace) -> int:
    """Every fault under the sampler, then the confusion table."""
    if args.from_recordings is not None:
        return rejudge(args)
    faults = parse_faults(args.faults)
    check_torch()
    duration = args.duration if args.duration is not None else 30.0
    window = min(args.window, duration)
    interval = DOCTOR_INTERVAL_S  # what gpuwatch doctor uses live: the doctor is judged as users run it
    # a fault recording's stacks are its evidence: sampled back to back, with no cap on their cost (a
    # native unwind of a torch process costs ~0.5 s of CPU, which the doctor's live cap spreads over a minute)
    opened = open_sampling(args.device, interval, stacks_every_s=DOCTOR_STACKS_EVERY_S, stacks_budget=0.0)
    sampler, description = opened.sampler, opened.description
    (args.out / "faults").mkdir(parents=True, exist_ok=True)
    runs: list[FaultRun] = []
    try:
        with Progress(TextColumn("{task.description:<22}"), BarColumn(), TextColumn("{task.fields[status]}"),
                      TimeElapsedColumn(), console=Console(stderr=True), disable=not sys.stderr.isatty()) as progress:
            for fault in faults:
                task = progress.add_task(fault, total=duration, status="starting")

                def advance(done: float, task: TaskID = task) -> None:
                    progress.update(task, completed=done, status="sampling")

                run_ = run_fault(fault, sys.executable, duration, window, sampler, interval, advance)
                write_recording(args.out / "faults" / f"{fault}.ndjson.gz", run_, interval)
                top = top_problem(run_.findings)
                status = f"failed: {run_.error}" if run_.error else f"top {top.code if top else 'none'}"
                progress.update(task, completed=duration, status=status)
                if not sys.stderr.isatty():
                    print(f"{fault}: {status}", file=sys.stderr)
                runs.append(run_)
    finally:
        sampler.stop()
    gpu_names = sorted({g.name for r in runs for s in r.snapshots[:1] for g in s.gpus if g.name})
    meta = {"gpu": ", ".join(gpu_names) or "none", "sampling": description, "interval_s": interval,
            "seconds per fault": duration, "window_s": window,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    paths = write_report(args.out, runs, meta)
    print(paths["markdown"].read_text())
    print(f"wrote {paths['json']}, {paths['markdown']} and {len(runs)} recordings under {args.out / 'faults'}")
    return 0 if all(r.row()["correct"] for r in runs) else 1


def _old_meta(path: Path) -> dict[str, Any]:
    """The ``meta`` of a table written before into --out (its GPU name), or nothing: read through the guarded
    reader, since --out is the user's (a FIFO or a 5 GB file there must not hang or fill memory)."""
    if not path.exists():
        return {}
    try:
        old = files.read_json(path, 16 * files.MIB)
    except (OSError, ValueError) as exc:
        raise CliError(f"{path}: cannot read the table written before ({exc}); move it away") from None
    meta = old.get("meta") if isinstance(old, dict) else None
    return meta if isinstance(meta, dict) else {}
