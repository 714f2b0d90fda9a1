"""``gpuwatch validate`` on the stages: each stage of the reference workload as its own process under the
live sampler, capacity then traffic, with progress lines, the run recorded and the report rewritten after
each stage; with ``--from-details``, a finished run's report rendered again."""

from __future__ import annotations

import argparse
import platform
import socket
import sys
import time
from pathlib import Path

from rich.console import Console

from gpuwatch.cli.common import CliError
from gpuwatch.cli.validate_options import (
    check_torch,
    open_sampling,
    parse_shapes,
    parse_stages,
    stage_extra,
    traffic_plan,
)
from gpuwatch.model import files
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.validate import report, views
from gpuwatch.validate.runner import StageRun, diagnose_phases, run_stage
from gpuwatch.validate.shapes import LADDER
from gpuwatch.validate.views import SHARED_SHARE
from gpuwatch.workload.arrivals import parse_mix
from gpuwatch.workload.config import WorkloadConfig

RECORDING = "validate-run.ndjson.gz"
#: A run's details are a few hundred KiB; a bigger file is the wrong file (and must not fill memory).
MAX_DETAILS_BYTES = 16 * files.MIB
BATCHING = WorkloadConfig()  # the workload's batching defaults, which validate keeps


def rerender(details: Path, out: Path, recording: Path | None = None) -> int:
    """VALIDATION.md and validation.json written again from a finished run's details (with ``recording``, its
    findings judged again by the current doctor)."""
    try:
        v, meta = report.from_details(files.read_json(details, MAX_DETAILS_BYTES))
    except OSError as exc:
        raise CliError(f"{details}: cannot read it ({files.describe(exc)})") from None
    except UnicodeDecodeError:
        raise CliError(f"{details}: not UTF-8 text, so not a validation-details.json") from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise CliError(f"{details}: not a validation-details.json written by gpuwatch validate "
                       f"({type(exc).__name__}: {str(exc)[:200]})") from None
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


def run_stages(args: argparse.Namespace) -> int:
    """Every stage, capacity then traffic, under one sampler; then the tables, on the terminal and in --out."""
    stages = parse_stages(args.stages)
    shapes = parse_shapes(args.traffic)
    try:
        mix = parse_mix(args.mix)
    except ValueError as exc:
        raise CliError(f"--mix: {exc}") from None
    if args.repeats < 1:
        raise CliError(f"--repeats must be at least 1, got {args.repeats}")
    if args.workers is not None and args.workers < 1:
        raise CliError(f"--workers must be at least 1, got {args.workers}")
    duration = args.duration if args.duration is not None else (5.0 if args.device == "cuda" else 3.0)
    phase_s = args.phase_duration if args.phase_duration is not None else (2.0 if args.device == "cuda" else 1.2)
    if phase_s <= 0.2 + args.slo / 1000.0:
        raise CliError(f"--phase-duration {phase_s:g} s leaves no time to count requests: give more than "
                       f"{0.2 + args.slo / 1000.0:g} s (settling plus the {args.slo:g} ms objective)")
    check_torch()  # after every option is checked: a wrong flag is named the same with or without torch
    interval = max(0.2, min(1.0, duration / 6, phase_s / 8))
    extra = stage_extra(args)
    n_phases = len(shapes) * (1 + len(LADDER))
    estimate = views.estimate_s(args.device, len(stages), args.repeats if "naive" in stages else 1, duration,
                                n_phases, phase_s)
    print(f"gpuwatch validate: {len(stages)} stages, capacity {duration:g} s each (naive {args.repeats}x), "
          f"traffic {', '.join(shapes)}: up to {n_phases} phases of {phase_s:g} s per stage: at most about "
          f"{estimate / 60:.1f} min", file=sys.stderr)
    opened = open_sampling(args.device, interval)
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
            plan = traffic_plan(shapes, v.shared_rate, (cap.workload or {}).get("req_per_s") if cap else None, phase_s,
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
