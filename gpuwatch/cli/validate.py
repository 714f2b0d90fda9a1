"""``gpuwatch validate``: replay the incident stage by stage under the live sampler and print its table."""

from __future__ import annotations

import argparse
import platform
import socket
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from gpuwatch.cli.common import CliError, positive_float
from gpuwatch.doctor import top_problem
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.runtime.build import NoGpuError, SamplingOptions, open_producer
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sampler.sampler import Producer, Sampler
from gpuwatch.sources.host import HostSource
from gpuwatch.validate import report
from gpuwatch.validate.doctor_accuracy import FaultRun, run_fault, write_recording, write_report
from gpuwatch.validate.runner import StageRun, run_stage
from gpuwatch.workload.config import SIZES, STAGES, TRAFFIC
from gpuwatch.workload.faults_catalogue import FAULTS

RECORDING = "validate-run.ndjson.gz"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="run every workload stage under the sampler and print the incident's table",
                       description="Run each stage of the reference workload (naive, workers, batched, compiled, "
                       "bf16) as its own process, sample it live for --duration seconds, run the doctor on the "
                       "window, and print stage, GPU-Util, SM activity, SM occupancy, tensor activity, req/s, p99 "
                       "and the top finding. Writes validation.json, VALIDATION.md, validation-details.json and "
                       f"a recording of the run ({RECORDING}) to --out. Needs torch (the [workload] extra).")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where the model runs (default cuda)")
    p.add_argument("--duration", type=positive_float, default=None, metavar="S",
                   help="seconds sampled per stage (default 20 on cuda, 3 on cpu)")
    p.add_argument("--out", type=Path, default=Path("validate-out"), metavar="DIR",
                   help="where to write the table, details and recording (default ./validate-out)")
    p.add_argument("--stages", default=",".join(STAGES), metavar="LIST",
                   help=f"comma-separated stages to run (default {','.join(STAGES)})")
    p.add_argument("--size", choices=tuple(SIZES), help="model size (default: base on cuda, tiny on cpu)")
    p.add_argument("--traffic", choices=TRAFFIC, default="steady", help="traffic shape (default steady)")
    p.add_argument("--workers", type=int, metavar="N", help="preprocessing processes (default: cores - 2, at most 12)")
    p.add_argument("--rate", type=positive_float, metavar="R",
                   help="offer every stage the same open-loop load of R requests/s (p99 then includes "
                   "queueing); default: each stage at full load")
    p.add_argument("--doctor", action="store_true",
                   help="instead of the stages, inject every fault class (gpuwatch workload --fault) and write "
                   "the doctor's confusion table (doctor-accuracy.md/.json) and one recording per fault")
    p.add_argument("--faults", default=",".join(FAULTS), metavar="LIST",
                   help="with --doctor: comma-separated fault classes (default: all)")
    p.add_argument("--window", type=positive_float, default=15.0, metavar="S",
                   help="with --doctor: seconds the doctor judges, at the end of each fault (default 15)")
    p.set_defaults(func=run)


def _faults(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in FAULTS]
    if unknown or not names:
        raise CliError(f"--faults: unknown fault {', '.join(unknown) or '(none)'}; choose from {', '.join(FAULTS)}")
    return names


def _stages(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in STAGES]
    if unknown or not names:
        raise CliError(f"--stages: unknown stage {', '.join(unknown) or '(none)'}; choose from {', '.join(STAGES)}")
    return names


def _producer(device: str, interval: float) -> tuple[Producer, str]:
    try:
        opened = open_producer(SamplingOptions(interval=interval, slow_interval=interval))
        return opened.producer, opened.description
    except NoGpuError as exc:
        if device == "cuda":
            raise CliError(f"--device cuda needs an NVIDIA driver to sample: {exc}", exit_code=2) from None
        return LiveCollector([HostSource()]), "live via host only (no NVIDIA driver: GPU columns stay empty)"


def _check_torch() -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        from gpuwatch.workload.run import INSTALL_HINT

        raise CliError(f"torch is not installed: {INSTALL_HINT}", exit_code=2)


def run_doctor(args: argparse.Namespace) -> int:
    """Every fault under the sampler, then the confusion table."""
    faults = _faults(args.faults)
    _check_torch()
    duration = args.duration if args.duration is not None else 30.0
    window = min(args.window, duration)
    interval = 0.5  # what gpuwatch doctor uses live: the doctor is judged as users run it
    producer, description = _producer(args.device, interval)
    sampler = Sampler(producer, interval=interval)
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


def run(args: argparse.Namespace) -> int:
    if args.doctor:
        return run_doctor(args)
    stages = _stages(args.stages)
    _check_torch()
    duration = args.duration if args.duration is not None else (20.0 if args.device == "cuda" else 3.0)
    interval = max(0.2, min(1.0, duration / 6))
    extra = [*(["--size", args.size] if args.size else []), "--traffic", args.traffic,
             *(["--workers", str(args.workers)] if args.workers else []),
             *(["--rate", f"{args.rate:g}"] if args.rate else [])]
    producer, description = _producer(args.device, interval)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        writer = RecordingWriter(args.out / RECORDING, RecordingHeader(
            created=time.time(), interval_s=interval, hostname=socket.gethostname(),
            description=f"gpuwatch validate --device {args.device} --duration {duration:g}: stages {','.join(stages)}",
            meta={"source": description, "stages": stages}))
    except OSError as exc:
        raise CliError(f"cannot write to --out {args.out}: {exc.strerror}") from None
    sampler = Sampler(producer, interval=interval)
    sampler.subscribe(writer.write)
    console = Console(stderr=True)
    runs: list[StageRun] = []
    try:
        with Progress(TextColumn("{task.description:<22}"), BarColumn(), TextColumn("{task.fields[status]}"),
                      TimeElapsedColumn(), console=console, disable=not sys.stderr.isatty()) as progress:
            tasks = {s: progress.add_task(s, total=duration, status="waiting") for s in stages}
            for stage in stages:
                progress.update(tasks[stage], status="starting")
                task = tasks[stage]

                def advance(done: float, task: TaskID = task) -> None:
                    progress.update(task, completed=done, status="sampling")

                run_ = run_stage(stage, args.device, duration, sampler, interval, advance, extra)
                progress.update(tasks[stage], completed=duration, status="failed" if run_.error else "done")
                runs.append(run_)
                if not sys.stderr.isatty():
                    print(f"{stage}: {'failed: ' + run_.error if run_.error else 'done'}", file=sys.stderr)
    finally:
        sampler.stop()
        writer.close()
    gpu_names = sorted({g.name for r in runs for s in r.snapshots[:1] for g in s.gpus if g.name})
    meta = {"device": args.device, "gpu": ", ".join(gpu_names) or "none", "host": platform.node(),
            "sampling": description, "seconds sampled per stage": duration,
            "load": f"open loop, {args.rate:g} requests/s" if args.rate else
            "closed loop at full load (naive: 1 request in flight; workers: 2 per worker; batched on: 2.5 batches)",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    paths = report.write(args.out, runs, meta)
    out = Console(width=max(140, Console().width))
    out.print(report.terminal_table(runs, f"gpuwatch validate on {meta['gpu']} ({args.device})"))
    if (x := report.speedup(runs)) is not None:
        out.print(f"last stage against naive: {x}x req/s")
    out.print(f"wrote {paths['json']}, {paths['markdown']}, {paths['details']} and {args.out / RECORDING}")
    return 1 if all(r.error for r in runs) else 0
