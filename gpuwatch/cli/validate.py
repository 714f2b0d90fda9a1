"""``gpuwatch validate``: replay the incident stage by stage under the live sampler and print its table."""

from __future__ import annotations

import argparse
import json
import platform
import socket
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from gpuwatch.cli.common import CliError, positive_float
from gpuwatch.doctor import top_problem
from gpuwatch.model.interval import DOCTOR_INTERVAL_S
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.runtime.build import NoGpuError, Opened, SamplingOptions, open_sampler
from gpuwatch.validate import report, views
from gpuwatch.validate.doctor_accuracy import FaultRun, run_fault, write_recording, write_report
from gpuwatch.validate.runner import StageRun, run_stage
from gpuwatch.workload.config import SIZES, STAGES, TRAFFIC, WorkloadConfig
from gpuwatch.workload.faults_catalogue import FAULTS

RECORDING = "validate-run.ndjson.gz"
BATCHING = WorkloadConfig()  # the workload's batching defaults, which validate keeps


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="run every workload stage under the sampler and print the incident's table",
                       description="Run each stage of the reference workload (naive, workers, batched, compiled, "
                       "bf16) as its own process under the live sampler, twice: capacity (closed loop at full load, "
                       "--duration seconds: GPU-Util, SM activity, SM occupancy, tensor activity, req/s, p99, the "
                       "doctor's top finding) and latency (open loop, the same offered rate for every stage: "
                       "p50/p95/p99 and the share dropped or late). Writes validation.json, VALIDATION.md, "
                       "validation-details.json and "
                       f"a recording of the run ({RECORDING}) to --out. Needs torch (the [workload] extra).")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where the model runs (default cuda)")
    p.add_argument("--duration", type=positive_float, default=None, metavar="S",
                   help="capacity view: seconds sampled per stage (default 8 on cuda, 3 on cpu)")
    p.add_argument("--out", type=Path, default=Path("validate-out"), metavar="DIR",
                   help="where to write the table, details and recording (default ./validate-out)")
    p.add_argument("--stages", default=",".join(STAGES), metavar="LIST",
                   help=f"comma-separated stages to run (default {','.join(STAGES)})")
    p.add_argument("--size", choices=tuple(SIZES), help="model size (default: base on cuda, tiny on cpu)")
    p.add_argument("--traffic", choices=TRAFFIC, default="steady", help="traffic shape (default steady)")
    p.add_argument("--workers", type=int, metavar="N", help="preprocessing processes (default: cores - 2, at most 12)")
    p.add_argument("--rate", type=positive_float, metavar="R",
                   help="latency view: the open-loop load offered to every stage, requests/s (default: 80%% of "
                   "naive's measured capacity)")
    p.add_argument("--high-rate", type=float, metavar="R",
                   help="latency view: a second load only later stages sustain (default: twice naive's "
                   "capacity; 0: none)")
    p.add_argument("--latency-duration", type=positive_float, metavar="S",
                   help="seconds sampled per stage and rate in the latency view (default 10 on cuda, --duration "
                   "on cpu)")
    p.add_argument("--repeats", type=int, default=3, metavar="N",
                   help="capacity runs of naive, the baseline every ratio rests on; the table gives their spread "
                   "(default 3)")
    p.add_argument("--warmup", type=float, metavar="S", help="seconds each stage runs before it is measured")
    p.add_argument("--slo", type=positive_float, default=100.0, metavar="MS",
                   help="latency objective: answers later than MS count as late (default 100)")
    p.add_argument("--doctor", action="store_true",
                   help="instead of the stages, inject every fault class (gpuwatch workload --fault) and write "
                   "the doctor's confusion table (doctor-accuracy.md/.json) and one recording per fault")
    p.add_argument("--faults", default=",".join(FAULTS), metavar="LIST",
                   help="with --doctor: comma-separated fault classes (default: all)")
    p.add_argument("--window", type=positive_float, default=15.0, metavar="S",
                   help="with --doctor: seconds the doctor judges, at the end of each fault (default 15)")
    p.add_argument("--from-details", type=Path, metavar="FILE",
                   help="run nothing: re-render VALIDATION.md and validation.json into --out from a finished "
                   "run's validation-details.json (same numbers, the current report's words)")
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


def _open(device: str, interval: float) -> Opened:
    """The sources and the Sampler; without a driver, ``--device cpu`` samples the host alone."""
    try:
        return open_sampler(SamplingOptions(interval=interval, slow_interval=interval, host_only=device != "cuda"))
    except NoGpuError as exc:
        raise CliError(f"--device cuda needs an NVIDIA driver to sample: {exc}", exit_code=2) from None


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
    interval = DOCTOR_INTERVAL_S  # what gpuwatch doctor uses live: the doctor is judged as users run it
    opened = _open(args.device, interval)
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


def _stage_extra(args: argparse.Namespace) -> list[str]:
    return [*(["--size", args.size] if args.size else []), "--traffic", args.traffic,
            *(["--workers", str(args.workers)] if args.workers else []),
            *(["--warmup", f"{args.warmup:g}"] if args.warmup is not None else []), "--slo", f"{args.slo:g}"]


def rerender(details: Path, out: Path) -> int:
    try:
        v, meta = report.from_details(json.loads(details.read_text()))
    except OSError as exc:
        raise CliError(f"{details}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{details}: not a validation-details.json written by gpuwatch validate "
                       f"({type(exc).__name__}: {exc})") from None
    paths = report.write(out, v, meta)
    print(f"wrote {paths['markdown']} and {paths['json']} from {details}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.from_details is not None:
        return rerender(args.from_details, args.out)
    if args.doctor:
        return run_doctor(args)
    stages = _stages(args.stages)
    if args.repeats < 1:
        raise CliError(f"--repeats must be at least 1, got {args.repeats}")
    if args.high_rate is not None and args.high_rate < 0:
        raise CliError(f"--high-rate must be 0 (none) or a rate in requests/s, got {args.high_rate:g}")
    _check_torch()
    duration = args.duration if args.duration is not None else (8.0 if args.device == "cuda" else 3.0)
    latency_s = args.latency_duration if args.latency_duration is not None else \
        (10.0 if args.device == "cuda" else duration)
    interval = max(0.2, min(1.0, duration / 6))
    extra = _stage_extra(args)
    n_rates = 1 + (args.high_rate != 0)
    estimate = views.estimate_s(args.device, len(stages), args.repeats if "naive" in stages else 1, duration,
                                latency_s, n_rates)
    print(f"gpuwatch validate: {len(stages)} stages, capacity {duration:g} s each (naive {args.repeats}x), "
          f"latency {latency_s:g} s at {n_rates} rate(s): about {estimate / 60:.1f} min", file=sys.stderr)
    opened = _open(args.device, interval)
    sampler, description = opened.sampler, opened.description
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        writer = RecordingWriter(args.out / RECORDING, RecordingHeader(
            created=time.time(), interval_s=interval, hostname=socket.gethostname(),
            description=f"gpuwatch validate --device {args.device} --duration {duration:g}: stages {','.join(stages)}",
            meta={"source": description, "stages": stages}))
    except OSError as exc:
        raise CliError(f"cannot write to --out {args.out}: {exc.strerror}") from None
    sampler.subscribe(writer.write)
    v = views.Validation(stages)
    meta: dict[str, object] = {}
    started = time.monotonic()

    def measure(label: str, stage: str, seconds: float, more: list[str]) -> StageRun:
        run_ = run_stage(stage, args.device, seconds, sampler, interval, lambda _done: None, [*extra, *more])
        print(f"{label} {stage}: {'failed: ' + run_.error if run_.error else _said(run_)}", file=sys.stderr)
        return run_

    try:
        for stage in stages:
            for _ in range(args.repeats if stage == "naive" else 1):
                v.capacity.setdefault(stage, []).append(measure("capacity", stage, duration, []))
            meta = _meta(args, v, description, duration, latency_s)
            report.write(args.out, v, meta)  # a run cut short still leaves what it measured
        v.rates = views.choose_rates(views.median_capacity(v.capacity_runs_req_per_s("naive")), args.rate,
                                     args.high_rate)
        for rate in v.rates:
            for stage in stages:
                v.latency.setdefault(rate, {})[stage] = measure(f"at {rate:g} req/s", stage, latency_s,
                                                                ["--rate", f"{rate:g}"])
                meta = _meta(args, v, description, duration, latency_s)
                report.write(args.out, v, meta)
    finally:
        sampler.stop()
        writer.close()
    meta = {**_meta(args, v, description, duration, latency_s), "wall time": f"{time.monotonic() - started:.0f} s"}
    paths = report.write(args.out, v, meta)
    out = Console(width=max(140, Console().width))
    for table in report.terminal_tables(v, f"gpuwatch validate on {meta['gpu']} ({args.device})"):
        out.print(table)
    for line in report.summary(v):
        out.print(line)
    out.print(f"wrote {paths['json']}, {paths['markdown']}, {paths['details']} and {args.out / RECORDING}")
    runs = [r for rs in v.capacity.values() for r in rs]
    return 1 if all(r.error for r in runs) else 0


def _said(run_: StageRun) -> str:
    w = run_.workload or {}
    return f"{w.get('req_per_s')} req/s, p99 {w.get('p99_ms')} ms, {w.get('dropped_pct')}% dropped or late"


def _meta(args: argparse.Namespace, v: views.Validation, description: str, duration: float,
          latency_s: float) -> dict[str, object]:
    snaps = [s for rs in v.capacity.values() for r in rs for s in r.snapshots[:1]]
    gpu_names = sorted({g.name for s in snaps for g in s.gpus if g.name})
    rates = ", ".join(f"{r:g}" for r in v.rates) or "no rate (naive's capacity not measured yet; --rate sets one)"
    return {"device": args.device, "gpu": ", ".join(gpu_names) or "none", "host": platform.node(),
            "sampling": description,
            "capacity": f"closed loop at full load, {duration:g} s sampled per stage (naive: 1 request in flight; "
            "workers: 2 per worker; batched on: 3 batches of the longest bucket)",
            "latency": f"open loop (Poisson arrivals) at {rates} requests/s, {latency_s:g} s per stage; shared rate "
            f"{views.SHARED_SHARE:.0%} of naive's median capacity unless --rate; late: over {args.slo:g} ms",
            "batched stages": "an idle GPU takes what waits at once; while it is busy a batch leaves when full or "
            "when its oldest request waited "
            f"{BATCHING.max_batch_delay_ms:g} ms; requests queued over {BATCHING.queue_timeout_ms:g} ms are shed "
            "(counted as dropped)",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
