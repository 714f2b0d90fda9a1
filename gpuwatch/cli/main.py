"""``gpuwatch``: one entry point, one subcommand per job. Bare ``gpuwatch`` opens the dashboard."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from gpuwatch import __version__
from gpuwatch.cli.common import CliError

#: Subcommand modules, in the order ``--help`` lists them. Each has ``register(subparsers)``.
COMMANDS = ("tui", "snapshot", "record", "doctor", "rules", "daemon", "install_service", "workload", "validate")

DESCRIPTION = """\
Live dashboard, Prometheus exporter and alerting daemon for NVIDIA GPUs that shows what GPU-Util hides
(SM activity, occupancy, tensor activity, the CPU side of the pipeline) and says why a GPU is under-used.

With no NVIDIA driver on this machine, the commands that sample play a bundled recording made on an
H200 instead (labelled as a recording), or whatever --replay FILE names."""


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand module named on the command line (None: none, or top-level --help)."""
    for arg in argv:
        if arg.startswith("-"):
            if arg in ("-h", "--help", "--version"):
                return None
            continue
        name = arg.replace("-", "_")
        return name if name in COMMANDS else None
    return "tui"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that command is imported and registered, so a command does not pay
    the start-up time and memory of every other command's dependencies (aiohttp, textual, torch ...)."""
    parser = argparse.ArgumentParser(prog="gpuwatch", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpuwatch {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name in (only,) if only else COMMANDS:
        try:
            module = importlib.import_module(f"gpuwatch.cli.{name}")
        except ImportError as exc:
            # One command whose dependency is missing (e.g. textual not installed) must not take the
            # others down with it: leave it out of this run and say why.
            logging.getLogger(__name__).warning("command %s unavailable: %s", name.replace("_", "-"), exc)
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_chosen_command(argv))
    args = parser.parse_args(argv)
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command is None:
        args = parser.parse_args([*argv, "tui"])
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"gpuwatch: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
