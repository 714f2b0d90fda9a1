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
from gpuwatch.validate.doctor_accuracy import FaultRun, judge_recordings, run_fault, write_recording, write_report
from gpuwatch.validate.runner import StageRun, diagnose_phases, run_stage
from gpuwatch.validate.shapes import LADDER
from gpuwatch.validate.views import SHARED_SHARE
from gpuwatch.workload.arrivals import DEFAULT_MIX, SHAPES, parse_mix
from gpuwatch.workload.config import SIZES, STAGES, WorkloadConfig
from gpuwatch.workload.faults_catalogue import FAULTS
from gpuwatch.workload.phases import Phase, Plan

RECORDING = "validate-run.ndjson.gz"
BATCHING = WorkloadConfig()  # the workload's batching defaults, which validate keeps


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="run every workload stage under the sampler and print the incident's table",
                       description="Run each stage of the reference workload (naive, workers, batched, compiled, "
                       "bf16) as its own process under the live sampler, twice: capacity (closed loop at full load, "
                       "--duration seconds: GPU-Util, SM activity, SM occupancy, tensor activity, req/s, p99, the "
                       "doctor's top finding) and traffic (open loop under each --traffic shape, one process per "
                       "stage running its phases back to back: p99 at the rate offered to every stage, then a ladder "
                       "of rising rates that sizes what it sustains and where it sits in the 70-85% GPU-Util "
                       "planning band). Writes validation.json, VALIDATION.md, validation-details.json and "
                       f"a recording of the run ({RECORDING}) to --out. Needs torch (the [workload] extra).")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where the model runs (default cuda)")
    p.add_argument("--duration", type=positive_float, default=None, metavar="S",
                   help="capacity view: seconds sampled per stage (default 5 on cuda, 3 on cpu)")
    p.add_argument("--out", type=Path, default=Path("validate-out"), metavar="DIR",
                   help="where to write the table, details and recording (default ./validate-out)")
    p.add_argument("--stages", default=",".join(STAGES), metavar="LIST",
                   help=f"comma-separated stages to run (default {','.join(STAGES)})")
    p.add_argument("--size", choices=tuple(SIZES), help="model size (default: base on cuda, tiny on cpu)")
    p.add_argument("--traffic", default="all", metavar="LIST",
                   help=f"traffic shapes of the traffic view, comma-separated from {', '.join(SHAPES)}, or all "
                   "(default all). bursty: the mean rate inside 200 ms on-phases of every 400 ms; longtail: mostly "
                   "short documents, some very long; mixed: the three superposed at --mix weights")
    p.add_argument("--mix", default=_mix_text(DEFAULT_MIX), metavar="WEIGHTS",
                   help=f"the mixed shape's weights (default {_mix_text(DEFAULT_MIX)})")
    p.add_argument("--workers", type=int, metavar="N", help="preprocessing processes (default: cores - 2, at most 12)")
    p.add_argument("--rate", type=positive_float, metavar="R",
                   help="traffic view: the open-loop load offered to every stage under every shape, requests/s "
                   "(default: 80%% of naive's measured capacity)")
    p.add_argument("--phase-duration", type=positive_float, metavar="S",
                   help="traffic view: seconds per phase (a shape at one offered rate; default 2 on cuda, 1.2 on "
                   "cpu)")
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
    p.add_argument("--from-recordings", type=Path, metavar="DIR",
                   help="with --doctor: run nothing; judge the fault recordings in DIR again with the current "
                   "doctor and write the table into --out")
    p.add_argument("--recording", type=Path, metavar="FILE",
                   help="with --from-details: judge each stage's window and each traffic phase again with the "
                   "current doctor from the run's recording (validate-run.ndjson.gz)")
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


def rejudge(args: argparse.Namespace) -> int:
    """The confusion table from recordings already made, judged by the current doctor."""
    folder: Path = args.from_recordings
    if not folder.is_dir():
        raise CliError(f"{folder}: not a folder of fault recordings (written by gpuwatch validate --doctor)")
    runs = judge_recordings(folder, args.window)
    first = next((r.snapshots[0] for r in runs if r.snapshots), None)
    old = json.loads((args.out / "doctor-accuracy.json").read_text())["meta"] \
        if (args.out / "doctor-accuracy.json").exists() else {}
    meta = {**old, "window_s": args.window, "gpu": old.get("gpu") or (first.gpus[0].name if first and first.gpus
                                                                       else "none")}
    paths = write_report(args.out, runs, meta)
    print(f"wrote {paths['json']} and {paths['markdown']} from {len(runs)} recordings in {folder}", file=sys.stderr)
    return 0


def run_doctor(args: argparse.Namespace) -> int:
    """Every fault under the sampler, then the confusion table."""
    if args.from_recordings is not None:
        return rejudge(args)
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
    return [*(["--size", args.size] if args.size else []),
            *(["--workers", str(args.workers)] if args.workers else []),
            *(["--warmup", f"{args.warmup:g}"] if args.warmup is not None else []), "--slo", f"{args.slo:g}"]


def rerender(details: Path, out: Path, recording: Path | None = None) -> int:
    try:
        v, meta = report.from_details(json.loads(details.read_text()))
    except OSError as exc:
        raise CliError(f"{details}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"{details}: not a validation-details.json written by gpuwatch validate "
                       f"({type(exc).__name__}: {exc})") from None
    if recording is not None:
        from gpuwatch.model.recording import load
        from gpuwatch.validate.rejudge import rejudge
        from gpuwatch.workload.phases import Plan

        judged = rejudge(v, load(recording), Plan(phases=()).settle_s)
        meta["findings"] = (f"judged again by the current doctor from {recording.name} ({judged} runs), "
                            "the numbers as the run measured them")
    paths = report.write(out, v, meta)
    print(f"wrote {paths['markdown']} and {paths['json']} from {details}", file=sys.stderr)
    return 0


def _shapes(text: str) -> list[str]:
    names = list(SHAPES) if text.strip() == "all" else [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SHAPES]
    if unknown or not names:
        raise CliError(f"--traffic: unknown shape {', '.join(unknown) or '(none)'}; choose from "
                       f"{', '.join(SHAPES)}, or all")
    return names


def _mix_text(mix: dict[str, float]) -> str:
    return ",".join(f"{k}={w:g}" for k, w in mix.items())


def _plan(shapes: list[str], rate: float, capacity: float | None, phase_s: float, mix: dict[str, float],
          slo_ms: float) -> Plan:
    """Per shape: the shared rate, then the ladder of shares of the stage's closed-loop capacity (rates under
    the shared one only when the capacity is unknown)."""
    top = capacity or rate / SHARED_SHARE
    phases: list[Phase] = []
    for shape in shapes:
        phases.append(Phase(shape, rate, phase_s, f"shared-{shape}"))
        rungs = sorted({max(1.0, round(x * top)) for x in LADDER})
        phases += [Phase(shape, r, phase_s, f"ladder-{shape}") for r in rungs]
    settle = min(0.3, phase_s / 4)
    return Plan(tuple(phases), mix, settle_s=settle, tail_s=max(slo_ms / 1000.0 + 0.05, min(0.25, phase_s / 4)))


def run(args: argparse.Namespace) -> int:
    if args.from_details is not None:
        return rerender(args.from_details, args.out, args.recording)
    if args.doctor:
        return run_doctor(args)
    stages = _stages(args.stages)
    shapes = _shapes(args.traffic)
    try:
        mix = parse_mix(args.mix)
    except ValueError as exc:
        raise CliError(f"--mix: {exc}") from None
    if args.repeats < 1:
        raise CliError(f"--repeats must be at least 1, got {args.repeats}")
    _check_torch()
    duration = args.duration if args.duration is not None else (5.0 if args.device == "cuda" else 3.0)
    phase_s = args.phase_duration if args.phase_duration is not None else (2.0 if args.device == "cuda" else 1.2)
    if phase_s <= 0.2 + args.slo / 1000.0:
        raise CliError(f"--phase-duration {phase_s:g} s leaves no time to count requests: give more than "
                       f"{0.2 + args.slo / 1000.0:g} s (settling plus the {args.slo:g} ms objective)")
    interval = max(0.2, min(1.0, duration / 6, phase_s / 8))
    extra = _stage_extra(args)
    n_phases = len(shapes) * (1 + len(LADDER))
    estimate = views.estimate_s(args.device, len(stages), args.repeats if "naive" in stages else 1, duration,
                                n_phases, phase_s)
    print(f"gpuwatch validate: {len(stages)} stages, capacity {duration:g} s each (naive {args.repeats}x), "
          f"traffic {', '.join(shapes)}: up to {n_phases} phases of {phase_s:g} s per stage: at most about "
          f"{estimate / 60:.1f} min", file=sys.stderr)
    opened = _open(args.device, interval)
    sampler, description = opened.sampler, opened.description
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        writer = RecordingWriter(args.out / RECORDING, RecordingHeader(
            created=time.time(), interval_s=interval, hostname=socket.gethostname(),
            description=f"gpuwatch validate --device {args.device} --duration {duration:g}: stages {','.join(stages)}",
            meta={"source": description, "stages": stages, "shapes": shapes}))
    except OSError as exc:
        raise CliError(f"cannot write to --out {args.out}: {exc.strerror}") from None
    sampler.subscribe(writer.write)
    v = views.Validation(stages, shapes=shapes, mix=mix if "mixed" in shapes else {})
    started = time.monotonic()

    def meta() -> dict[str, object]:
        return _meta(args, v, description, duration, phase_s)

    def measure(label: str, stage: str, seconds: float, more: list[str]) -> StageRun:
        said = [0.0]

        def progress(done: float) -> None:  # a line every 20 s, so a long traffic run shows it is alive
            if done - said[0] >= 20.0:
                said[0] = done
                print(f"[{time.monotonic() - started:4.0f} s] {label} {stage}: {done:.0f} s sampled", file=sys.stderr)

        run_ = run_stage(stage, args.device, seconds, sampler, interval, progress, [*extra, *more])
        print(f"[{time.monotonic() - started:4.0f} s] {label} {stage}: "
              f"{'failed: ' + run_.error if run_.error else _said(run_)}", file=sys.stderr)
        return run_

    try:
        for stage in stages:
            for _ in range(args.repeats if stage == "naive" else 1):
                v.capacity.setdefault(stage, []).append(measure("capacity", stage, duration, ["--traffic", "steady"]))
            report.write(args.out, v, meta())  # a run cut short still leaves what it measured
        naive = views.median_capacity(v.capacity_runs_req_per_s("naive"))
        if not (args.rate or naive):
            raise CliError("no shared rate: naive's capacity was not measured; give --rate", exit_code=1)
        v.shared_rate = float(args.rate or max(1, round(SHARED_SHARE * (naive or 0.0))))
        for stage in stages:
            cap = v.capacity_run(stage)
            plan = _plan(shapes, v.shared_rate, (cap.workload or {}).get("req_per_s") if cap else None, phase_s,
                         mix, args.slo)
            run_ = measure("traffic", stage, plan.seconds + 5.0, ["--plan", plan.to_json()])
            diagnose_phases(run_, plan.settle_s)
            for line in _phase_lines(run_):
                print(f"    {line}", file=sys.stderr)
            v.traffic[stage] = run_
            report.write(args.out, v, meta())
    finally:
        sampler.stop()
        writer.close()
    final = {**meta(), "wall time": f"{time.monotonic() - started:.0f} s"}
    paths = report.write(args.out, v, final)
    out = Console(width=max(140, Console().width))
    for table in report.terminal_tables(v, f"gpuwatch validate on {final['gpu']} ({args.device})"):
        out.print(table)
    for line in report.summary(v):
        out.print(line)
    out.print(f"wrote {paths['json']}, {paths['markdown']}, {paths['details']} and {args.out / RECORDING}")
    runs = [r for rs in v.capacity.values() for r in rs]
    return 1 if all(r.error for r in runs) else 0


def _phase_lines(run_: StageRun) -> list[str]:
    return [f"{p['shape']:8} {p['rate']:>7g} req/s: p99 {p.get('p99_ms')} ms, {p.get('dropped_pct')}% late, "
            f"GPU-Util {p.get('gpu_util', '-')}%{'' if p.get('passed') else ' (not sustained)'}"
            for p in (run_.workload or {}).get("phases", [])]


def _said(run_: StageRun) -> str:
    w = run_.workload or {}
    if phases := w.get("phases"):
        return f"{len(phases)} phases, {sum(1 for p in phases if p.get('passed'))} sustained"
    return f"{w.get('req_per_s')} req/s, p99 {w.get('p99_ms')} ms, {w.get('dropped_pct')}% dropped or late"


def _meta(args: argparse.Namespace, v: views.Validation, description: str, duration: float,
          phase_s: float) -> dict[str, object]:
    snaps = [s for rs in v.capacity.values() for r in rs for s in r.snapshots[:1]]
    gpu_names = sorted({g.name for s in snaps for g in s.gpus if g.name})
    rate = f"{v.shared_rate:g}" if v.shared_rate else "not chosen yet"
    return {"device": args.device, "gpu": ", ".join(gpu_names) or "none", "host": platform.node(),
            "sampling": description,
            "capacity": f"closed loop at full load, steady traffic, {duration:g} s sampled per stage (naive: 1 "
            "request in flight; workers: 2 per worker; batched on: 3 batches of the longest bucket)",
            "traffic": f"open loop, shapes {', '.join(v.shapes)}, {phase_s:g} s per phase; shared rate {rate} "
            f"requests/s ({views.SHARED_SHARE:.0%} of naive's median capacity unless --rate); late: over "
            f"{args.slo:g} ms",
            "batched stages": "an idle GPU takes what waits at once; while it is busy a batch leaves when full or "
            "when its oldest request waited "
            f"{BATCHING.max_batch_delay_ms:g} ms; requests queued over {BATCHING.queue_timeout_ms:g} ms are shed "
            "(counted as dropped)",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
