"""``gpuwatch workload``: the reference inference service and its load generator, one incident stage per run."""

from __future__ import annotations

import argparse
import json
import sys

from gpuwatch.cli.common import CliError, positive_float
from gpuwatch.workload.config import READY_LINE, SIZES, STAGE_HELP, STAGES, TRAFFIC, WorkloadConfig, default_workers
from gpuwatch.workload.faults_catalogue import FAULTS

EPILOG = "stages (each keeps the fixes before it):\n" + "\n".join(
    f"  {name:9} {text}" for name, text in STAGE_HELP.items())


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workload", help="run the reference inference service under load (needs torch)",
                       description="A transformer encoder with random weights served under a closed-loop load "
                       "generator, written the way the incident's service was (naive) and with each of its "
                       "fixes. Prints req/s and p50/p95/p99 latency. Needs the [workload] extra (torch).",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stage", choices=STAGES, default="naive", help="which version of the service (default naive)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="where the model runs (default cuda)")
    p.add_argument("--size", choices=tuple(SIZES), default=None,
                   help="model and request size (default: base on cuda, tiny on cpu)")
    p.add_argument("--duration", type=positive_float, default=10.0, metavar="S",
                   help="seconds measured, after the warm-up (default 10)")
    p.add_argument("--warmup", type=float, default=None, metavar="S",
                   help="seconds run before measuring (default 2 on cuda, 0.5 on cpu)")
    p.add_argument("--traffic", choices=TRAFFIC, default="steady",
                   help="steady: even lengths, full load; longtail: mostly short, some very long; "
                   "bursty: on 200 ms, off 200 ms")
    p.add_argument("--io", action="store_true", help="each request also reads an attachment from a slow store")
    p.add_argument("--io-latency", type=float, default=5.0, metavar="MS", help="latency of one store read (default 5)")
    p.add_argument("--cache", action="store_true", help="with --io: keep attachments in memory after the first read")
    p.add_argument("--workers", type=int, default=default_workers(), metavar="N",
                   help=f"preprocessing processes from the workers stage on (default {default_workers()})")
    p.add_argument("--concurrency", type=int, default=0, metavar="N",
                   help="requests in flight (default: 1 naive, 2 per worker, 3 batches of the longest bucket "
                        "from batched on)")
    p.add_argument("--rate", type=float, default=0.0, metavar="R",
                   help="open loop: R requests/s arrive on a Poisson schedule whatever the server manages, so "
                   "p99 includes queueing (compare stages at the same R); default: closed loop, full load")
    p.add_argument("--max-batch-delay", type=positive_float, default=5.0, metavar="MS",
                   help="batched stages: a batch leaves once its oldest request waited MS, full or not (default 5)")
    p.add_argument("--queue-timeout", type=positive_float, default=500.0, metavar="MS",
                   help="batched stages: shed requests still queued after MS, so an overloaded server answers "
                   "'overloaded' instead of queueing for seconds (default 500)")
    p.add_argument("--slo", type=positive_float, default=100.0, metavar="MS",
                   help="latency objective: answers later than MS count as late (default 100)")
    p.add_argument("--compiler", choices=("auto", "graphs", "inductor", "none"), default="auto",
                   help="compiled/bf16 stages: CUDA graphs, torch.compile, or none (default: graphs on cuda)")
    p.add_argument("--fault", choices=tuple(FAULTS), metavar="CLASS",
                   help="instead of the service, inject one known bottleneck for --duration seconds: "
                   + ", ".join(FAULTS))
    p.add_argument("--plan", default="", metavar="JSON",
                   help="run phases back to back instead of one window: traffic shapes at offered rates, as "
                   "gpuwatch validate writes them (the result gains a row per phase); --duration is ignored")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> WorkloadConfig:
    if args.workers < 1:
        raise CliError(f"--workers must be at least 1, got {args.workers}")
    if args.cache and not args.io:
        raise CliError("--cache caches the --io attachments: add --io")
    if args.plan:
        from gpuwatch.workload.phases import Plan

        try:
            Plan.from_json(args.plan)
        except ValueError as exc:
            raise CliError(f"--plan: {exc}") from None
    size = args.size or ("base" if args.device == "cuda" else "tiny")
    warmup = args.warmup if args.warmup is not None else (2.0 if args.device == "cuda" else 0.5)
    return WorkloadConfig(stage=args.stage, device=args.device, size=size, duration_s=args.duration,
                          warmup_s=max(0.0, warmup), traffic=args.traffic, io=args.io,
                          io_latency_ms=args.io_latency, cache=args.cache, workers=args.workers,
                          concurrency=args.concurrency, compiler=args.compiler, rate=max(0.0, args.rate),
                          max_batch_delay_ms=args.max_batch_delay, queue_timeout_ms=args.queue_timeout,
                          slo_ms=args.slo, plan=args.plan)


def _ready() -> None:
    print(READY_LINE, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.fault:
        return _run_fault(args)
    cfg = config_from_args(args)
    from gpuwatch.workload.run import WorkloadError, run_stage

    try:
        result = run_stage(cfg, on_ready=_ready)
    except WorkloadError as exc:
        raise CliError(str(exc), exit_code=2) from None
    if args.json:
        print(json.dumps(result.to_dict()))
        return 0
    print(f"stage {result.stage} on {result.device} ({result.size}, {result.traffic} traffic): "
          f"{result.requests} requests in {result.duration_s:.1f} s")
    print(f"  throughput  {result.req_per_s:10.1f} req/s" +
          (f"   mean batch {result.mean_batch:.1f}" if result.mean_batch else ""))
    if result.dropped_pct is not None:
        print(f"  shed {result.shed}, late (over {cfg.slo_ms:g} ms) {result.late}: {result.dropped_pct:g}% "
              "dropped or late")
    for q in ("p50", "p95", "p99"):
        value = getattr(result, f"{q}_ms")
        print(f"  latency {q} " + ("        -" if value is None else f"{value:10.2f} ms"))
    for key, value in result.notes.items():
        print(f"  {key}: {value}")
    return 0


def _run_fault(args: argparse.Namespace) -> int:
    from gpuwatch.workload.faults import run_fault
    from gpuwatch.workload.run import WorkloadError

    try:
        result = run_fault(args.fault, args.duration, _ready, device=args.device)
    except WorkloadError as exc:
        raise CliError(str(exc), exit_code=2) from None
    print(json.dumps(result) if args.json else
          f"fault {result['fault']}: {result['loops']} loops in {result['seconds']} s "
          f"(the doctor should say {result['expected']})")
    return 0
