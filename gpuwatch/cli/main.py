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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuwatch", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpuwatch {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name in COMMANDS:
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
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command is None:
        args = parser.parse_args([*(argv or sys.argv[1:]), "tui"])
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
