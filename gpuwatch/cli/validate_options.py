"""What ``gpuwatch validate``'s flags become before anything runs: the fault, stage and traffic-shape lists
checked against their catalogues, the stage processes' own flags, each stage's traffic plan, torch checked
for, and the sampler opened. The stage run (``validate_stages``) and the doctor's run (``validate_doctor``)
share these."""

from __future__ import annotations

import argparse

from gpuwatch.cli.common import CliError
from gpuwatch.runtime.build import NoGpuError, Opened, SamplingOptions, open_sampler
from gpuwatch.validate.shapes import LADDER
from gpuwatch.validate.views import SHARED_SHARE
from gpuwatch.workload.arrivals import SHAPES
from gpuwatch.workload.config import STAGES
from gpuwatch.workload.faults_catalogue import FAULTS
from gpuwatch.workload.phases import Phase, Plan


def parse_faults(text: str) -> list[str]:
    """--faults: fault classes of the catalogue, in the order given."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in FAULTS]
    if unknown or not names:
        raise CliError(f"--faults: unknown fault {', '.join(unknown) or '(none)'}; choose from {', '.join(FAULTS)}")
    return names


def parse_stages(text: str) -> list[str]:
    """--stages: workload stages, in the order given."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in STAGES]
    if unknown or not names:
        raise CliError(f"--stages: unknown stage {', '.join(unknown) or '(none)'}; choose from {', '.join(STAGES)}")
    return names


def parse_shapes(text: str) -> list[str]:
    """--traffic: traffic shapes, in the order given, or all of them."""
    names = list(SHAPES) if text.strip() == "all" else [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SHAPES]
    if unknown or not names:
        raise CliError(f"--traffic: unknown shape {', '.join(unknown) or '(none)'}; choose from "
                       f"{', '.join(SHAPES)}, or all")
    return names


def stage_extra(args: argparse.Namespace) -> list[str]:
    """The flags every stage process gets from validate's own (--size, --workers, --warmup, --slo)."""
    return [*(["--size", args.size] if args.size else []),
            *(["--workers", str(args.workers)] if args.workers else []),
            *(["--warmup", f"{args.warmup:g}"] if args.warmup is not None else []), "--slo", f"{args.slo:g}"]


def traffic_plan(shapes: list[str], rate: float, capacity: float | None, phase_s: float,
                 mix: dict[str, float], slo_ms: float) -> Plan:
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


def check_torch() -> None:
    """Torch must be importable before any stage or fault is started: one line says how to install it."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        from gpuwatch.workload.run import INSTALL_HINT

        raise CliError(f"torch is not installed: {INSTALL_HINT}", exit_code=2)


def open_sampling(device: str, interval: float, stacks_every_s: float | None = None,
                  stacks_budget: float | None = None) -> Opened:
    """The sources and the Sampler; without a driver, ``--device cpu`` samples the host alone. Stacks are
    sampled as by default, or every ``stacks_every_s`` seconds (the doctor's pace, for fault recordings)
    within ``stacks_budget`` of a core (None: the default)."""
    opts = SamplingOptions(interval=interval, slow_interval=interval, host_only=device != "cuda",
                           stacks_budget=stacks_budget)
    if stacks_every_s is not None:
        opts.stacks_every_s = stacks_every_s
    try:
        return open_sampler(opts)
    except NoGpuError as exc:
        raise CliError(f"--device cuda needs an NVIDIA driver to sample: {exc}", exit_code=2) from None
