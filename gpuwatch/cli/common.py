"""Pieces shared by the subcommands: errors with exit codes and the sampling options every sampling
command takes."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from gpuwatch.cli.paths import replay_file
from gpuwatch.config import fields
from gpuwatch.config.fields import FieldError, sampling_interval, shown
from gpuwatch.model.interval import DEFAULT_INTERVAL_S, MIN_INTERVAL_S
from gpuwatch.model.recording import RecordingError

if TYPE_CHECKING:
    from gpuwatch.runtime.build import Opened, SamplingOptions

MAX_SPEED = 10_000.0


class CliError(Exception):
    """A failure the user can fix: printed as one line, no traceback."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def positive_float(text: str) -> float:
    try:
        return fields.positive_float(text)
    except FieldError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_offset(text: str) -> float:
    """A point in a recording, in seconds from its start: finite and not negative."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text}")
    return value


def interval_seconds(text: str) -> float:
    """The config file's own check, so --interval and [sampler] interval accept the same values."""
    try:
        return sampling_interval(text)
    except FieldError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def replay_speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{shown(text)}' is not a number") from None
    if not math.isfinite(value) or not 0 <= value <= MAX_SPEED:
        raise argparse.ArgumentTypeError(f"must be between 0 (as fast as possible) and {MAX_SPEED:g}, "
                                         f"got {shown(text)}")
    return value


def dcgm_url(text: str) -> str:
    from gpuwatch.sources.dcgm import check_url

    try:
        return check_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_sampling_args(parser: argparse.ArgumentParser, *, interval: float = DEFAULT_INTERVAL_S) -> None:
    g = parser.add_argument_group("what to sample")
    g.add_argument("--interval", type=interval_seconds, default=interval, metavar="S",
                   help=f"seconds between samples, {MIN_INTERVAL_S:g} or more (default {interval:g})")
    g.add_argument("--replay", type=replay_file, metavar="FILE",
                   help="play a recording made by 'gpuwatch record' instead of sampling this machine "
                   "('bundled': the H200 recording shipped with gpuwatch)")
    g.add_argument("--speed", type=replay_speed, default=1.0, metavar="X",
                   help="replay speed: 1 = as recorded, 10 = ten times faster, 0 = as fast as possible")
    g.add_argument("--loop", action="store_true", help="replay the recording over and over")
    g.add_argument("--dcgm", metavar="URL", type=dcgm_url,
                   help="also scrape a dcgm-exporter /metrics endpoint (http://node:9400/metrics); "
                   "without an NVIDIA driver here, its GPUs are the ones shown")
    g.add_argument("--no-stacks", action="store_true",
                   help="do not sample the stacks of the processes on under-used GPUs (py-spy, on by default "
                   "where it is installed and ptrace is permitted)")


def options_from_args(args: argparse.Namespace, *, allow_bundled: bool = False) -> SamplingOptions:
    # imported here, not at the top: the sources (psutil, the sampler) cost every command's start-up, and an
    # argument error or a command that samples nothing (rules, compare, report) never needs them
    from gpuwatch.runtime.build import SamplingOptions

    return SamplingOptions(replay=args.replay, speed=args.speed, loop=args.loop, interval=args.interval,
                           dcgm_url=getattr(args, "dcgm", None), allow_bundled=allow_bundled,
                           stacks=not getattr(args, "no_stacks", False))


def open_from_args(args: argparse.Namespace, *, allow_bundled: bool = False) -> Opened:
    """Open the sources and the Sampler the arguments ask for; known failures become CliErrors (exit 2)."""
    return open_options(options_from_args(args, allow_bundled=allow_bundled))


def open_options(options: SamplingOptions) -> Opened:
    """Open the sources and the Sampler ``options`` describe; known failures become CliErrors (exit 2: no GPU)."""
    from gpuwatch.runtime.build import NoGpuError, open_sampler

    try:
        return open_sampler(options)
    except NoGpuError as exc:
        raise CliError(str(exc), exit_code=2) from None
    except RecordingError as exc:
        raise CliError(str(exc), exit_code=2) from None
