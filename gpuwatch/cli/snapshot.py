"""``gpuwatch snapshot``: one sample, as a readable table or as JSON for scripts."""

from __future__ import annotations

import argparse
import math
import sys
import time

from gpuwatch.cli.common import CliError, add_sampling_args, open_options, options_from_args, seconds_offset
from gpuwatch.cli.table import render_snapshot
from gpuwatch.model.codec import dumps
from gpuwatch.model.visible import visible_lines


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snapshot", help="print one sample (table, or --json)",
                       description="Take one sample of the GPUs, their processes and the host and print it. "
                       "Rates (CPU %, IO, GPM activity) need two readings, so a live snapshot waits one "
                       "--interval between them.")
    p.add_argument("--json", action="store_true", help="print the Snapshot as JSON")
    p.add_argument("--at", type=seconds_offset, default=0.0, metavar="S",
                   help="with --replay: the snapshot S seconds into the recording (0 = the first)")
    add_sampling_args(p)
    p.set_defaults(func=run)


def _within_loop(producer: object, at: float) -> float:
    """``--at`` within one pass of a looping replay: a looped recording repeats, so ``--at 1e9`` is the same
    moment as ``--at`` modulo its period, and walking there would take days (said on stderr)."""
    from gpuwatch.sources.replay import ReplayProducer

    if not at or not isinstance(producer, ReplayProducer) or not producer.loop:
        return at
    period = producer.period()
    if period <= 0 or at < period:
        return at
    within = math.fmod(at, period)
    sys.stderr.write(f"--at {at:g} is past the end of the looping recording ({period:g} s a pass): showing "
                     f"{within:g} s into a pass\n")
    return within


def run(args: argparse.Namespace) -> int:
    args.no_stacks = True  # one sample: no stack window could finish before it is printed
    opened = open_options(options_from_args(args))
    if args.at and not opened.is_recording:
        raise CliError("--at picks a moment of a recording: give --replay FILE", exit_code=2)
    sampler = opened.sampler
    at = _within_loop(opened.producer, args.at)
    try:
        snap = sampler.tick()
        if opened.is_recording and snap is not None:
            first, count = snap.time, 1
            while snap.time - first < at:
                later = sampler.tick()
                if later is None:
                    longest = math.floor((snap.time - first) * 10) / 10
                    raise CliError(f"--at {args.at:g}: the recording is {longest:.1f} s long ({count} snapshots); "
                                   f"give --at between 0 and {longest:.1f}", exit_code=2)
                snap, count = later, count + 1
        else:
            time.sleep(args.interval)  # second reading: CPU %, IO rates and GPM need a delta
            snap = sampler.tick()
    finally:
        sampler.stop()
    if snap is None:
        raise CliError("the recording holds no snapshots", exit_code=2)
    if not opened.is_recording and not snap.gpus:
        failing = [f"{s.name}: {s.message}" for s in snap.sources if s.state != "ok" and s.name != "host"]
        if failing:  # e.g. --dcgm alone and the exporter is down: say so instead of printing no GPUs
            raise CliError("no GPU readings: " + "; ".join(failing), exit_code=2)
    if args.json:
        sys.stdout.write(dumps(snap, indent=2) + "\n")
    else:
        sys.stdout.write(visible_lines(render_snapshot(snap, opened.description)))
    return 0
