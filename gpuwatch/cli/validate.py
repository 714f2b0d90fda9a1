"""``gpuwatch validate``: replay the incident stage by stage under the live sampler and print its table.

This module is the command's flags and which of its runs they ask for: the stages (``validate_stages``),
the doctor's faults (``validate_doctor``), or a finished run's report rendered again."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuwatch.cli.common import positive_float
from gpuwatch.cli.paths import input_dir, input_file, output_dir
from gpuwatch.cli.validate_doctor import run_doctor
from gpuwatch.cli.validate_stages import RECORDING, rerender, run_stages
from gpuwatch.workload.arrivals import DEFAULT_MIX, SHAPES
from gpuwatch.workload.config import SIZES, STAGES
from gpuwatch.workload.faults_catalogue import FAULTS


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
    p.add_argument("--out", type=output_dir, default=Path("validate-out"), metavar="DIR",
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
    p.add_argument("--from-recordings", type=input_dir, metavar="DIR",
                   help="with --doctor: run nothing; judge the fault recordings in DIR again with the current "
                   "doctor and write the table into --out")
    p.add_argument("--recording", type=input_file, metavar="FILE",
                   help="with --from-details: judge each stage's window and each traffic phase again with the "
                   "current doctor from the run's recording (validate-run.ndjson.gz)")
    p.add_argument("--from-details", type=input_file, metavar="FILE",
                   help="run nothing: re-render VALIDATION.md and validation.json into --out from a finished "
                   "run's validation-details.json (same numbers, the current report's words)")
    p.set_defaults(func=run)


def _mix_text(mix: dict[str, float]) -> str:
    return ",".join(f"{k}={w:g}" for k, w in mix.items())


def run(args: argparse.Namespace) -> int:
    if args.from_details is not None:
        return rerender(args.from_details, args.out, args.recording)
    if args.doctor:
        return run_doctor(args)
    return run_stages(args)
