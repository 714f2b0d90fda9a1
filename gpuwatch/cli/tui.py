"""``gpuwatch tui`` (and bare ``gpuwatch``): the dashboard, sampling here or watching daemons."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwatch.cli.common import CliError, add_sampling_args, open_options, options_from_args, positive_float
from gpuwatch.cli.paths import input_file, rule_path
from gpuwatch.config import fields
from gpuwatch.config.fields import FieldError
from gpuwatch.config.model import DEFAULT_PORT
from gpuwatch.model import files
from gpuwatch.model.durations import format_duration
from gpuwatch.model.interval import DEFAULT_HISTORY_S, MAX_HISTORY_S, MIN_HISTORY_S, history_capacity
from gpuwatch.runtime import memory

if TYPE_CHECKING:
    from gpuwatch.tui.feed import Feed

#: Where ``--connect`` without a URL looks: the daemon's default listen address.
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"

DESCRIPTION = """\
The live dashboard: GPU-Util beside SM activity, occupancy and tensor activity, memory, power, clocks and
clock-event reasons, a process table with the CPU side of each GPU process, alerts and the doctor's
diagnosis. Press ? inside for the keys.

With no NVIDIA driver here it plays the bundled H200 recording, labelled RECORDING.
With --connect it watches one or more 'gpuwatch daemon' instances: one row per host and GPU."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tui", help="the live dashboard (what bare 'gpuwatch' runs)", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sampling_args(p)
    p.add_argument("--connect", action="append", nargs="?", const=DEFAULT_URL, metavar="URL",
                   help=f"watch a gpuwatch daemon instead of sampling here (repeat for a fleet; "
                   f"without URL: {DEFAULT_URL})")
    p.add_argument("--token-file", type=input_file, metavar="FILE",
                   help="with --connect: bearer token for daemons that require one for reads")
    p.add_argument("--rules", action="append", type=rule_path, metavar="FILE",
                   help="alert rule file (repeatable; default: the shipped rules)")
    p.add_argument("--history", type=history_seconds, default=DEFAULT_HISTORY_S, metavar="DURATION",
                   help=f"how far back a paused dashboard can go ([ and ] step, < and > a minute): 90s, 10m, 1h "
                   f"(default {format_duration(DEFAULT_HISTORY_S)}); with --connect, how much each daemon sends of "
                   "what it keeps")
    p.add_argument("--diagnosis-window", type=positive_float, default=None, metavar="S",
                   help="seconds the Diagnosis pane judges (default 30): a finding goes within one window "
                   "of the load changing")
    p.set_defaults(func=run)


def history_seconds(text: str) -> float:
    """``--history``: a duration as the config file writes one, within the limits the sampler keeps."""
    try:
        return fields.duration_between(MIN_HISTORY_S, MAX_HISTORY_S)(text)
    except FieldError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_feed(args: argparse.Namespace) -> Feed:
    """The feed the arguments ask for; user errors become CliErrors before the screen is taken over.

    Textual, requests and the alert engine are imported here, not at module level, so other commands
    (and ``gpuwatch --help``) do not pay for them."""
    from gpuwatch.tui.feed import local_feed

    if getattr(args, "connect", None):
        from gpuwatch.tui.remote import RemoteFeed

        if args.replay is not None:
            raise CliError("--connect and --replay exclude each other: watch daemons, or play a file here")
        return RemoteFeed(list(args.connect), token=_read_token(getattr(args, "token_file", None)),
                          diagnosis_window_s=getattr(args, "diagnosis_window", None),
                          history_capacity=history_capacity(args.history, args.interval))
    rules = getattr(args, "rules", None)
    if rules:  # rules the user named must load, checked before a source is opened
        from gpuwatch.tui.analysis import load_engine

        engine, note = load_engine(rules)
        if engine is None:
            raise CliError(note)
    # the bundled recording's service starts after ~10 idle seconds: it plays from where its GPU gets busy
    opened = open_options(dataclasses.replace(options_from_args(args, allow_bundled=True), skip_bundled_idle=True,
                                              history_s=args.history))
    window = getattr(args, "diagnosis_window", None)
    return local_feed(opened.sampler, opened.description, opened.is_recording,
                      rule_paths=rules, **({"diagnosis_window_s": window} if window else {}))


def _read_token(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        token = files.read_text(path, 64 * 1024).strip()
    except OSError as exc:
        raise CliError(f"{path}: cannot read the token file ({files.describe(exc)}); check --token-file") from None
    except UnicodeDecodeError:
        raise CliError(f"{path}: the token file is not UTF-8 text; check --token-file") from None
    if not token:
        raise CliError(f"{path}: the token file is empty; write the daemon's token into it")
    return token


def run(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError("the dashboard needs a terminal; for text output use 'gpuwatch snapshot'")
    # "no NVIDIA driver; playing the bundled recording" is the dashboard's RECORDING banner: logged to the
    # terminal too, it stayed there after quitting
    logging.getLogger("gpuwatch.runtime.build").addFilter(
        lambda r: not r.getMessage().endswith("playing the bundled H200 recording"))
    memory.tune_allocator()  # before the sampler's threads start
    feed = build_feed(args)
    from gpuwatch.tui.app import make_app

    make_app(feed, upkeep=memory.Releaser()).run()
    return 0
