"""``gpuwatch``: one entry point, one subcommand per job. Bare ``gpuwatch`` opens the dashboard."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from gpuwatch import __version__
from gpuwatch.cli.common import CliError
from gpuwatch.model.errors import InputError
from gpuwatch.model.visible import visible_lines

#: Subcommand modules, in the order ``--help`` lists them. Each has ``register(subparsers)``.
COMMANDS = ("tui", "snapshot", "record", "doctor", "rules", "daemon", "install_service", "workload", "validate",
            "report", "compare")

DESCRIPTION = """\
Live dashboard, Prometheus exporter and alerting daemon for NVIDIA GPUs that shows what GPU-Util hides
(SM activity, occupancy, tensor activity, the CPU side of the pipeline) and says why a GPU is under-used.

Bare 'gpuwatch' is the dashboard and takes its flags ('gpuwatch --replay FILE'). With no NVIDIA driver
on this machine the dashboard and 'doctor' play a bundled recording made on an H200 (labelled as a
recording); 'snapshot', 'record' and 'daemon' say so and exit 2 unless given --replay FILE or --dcgm URL.
'rules test' backtests over the bundled recording unless given --replay. Wherever a recording is read,
'--replay bundled' names the bundled one, wherever gpuwatch is installed."""


VERBOSE = re.compile(r"-v+|--verbose")


def with_command(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``tui`` put in where no command is named, so bare ``gpuwatch`` takes the dashboard's
    flags (``gpuwatch --replay FILE``); top-level flags (-v, --help, --version) stay in front of it, and a
    -v given after the command (``gpuwatch doctor -v``) is moved there."""
    argv = [a for a in argv if VERBOSE.fullmatch(a)] + [a for a in argv if not VERBOSE.fullmatch(a)]
    i = 0
    while i < len(argv) and VERBOSE.fullmatch(argv[i]):
        i += 1
    if i < len(argv) and (argv[i] in ("-h", "--help", "--version") or not argv[i].startswith("-")):
        return argv  # a command (or a typo argparse names), or top-level help
    return [*argv[:i], "tui", *argv[i:]]


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand module named on the command line (None: none, or top-level --help)."""
    for arg in argv:
        if arg.startswith("-"):
            if arg in ("-h", "--help", "--version"):
                return None
            continue
        name = arg.replace("-", "_")
        return name if name in COMMANDS else None
    return None


class Parser(argparse.ArgumentParser):
    """argparse, with the values quoted in its errors cut short: ``--pid`` given 5 000 digits must not
    become a 5 000-character error line (nor an ESC in one steer the terminal). Subcommand parsers are of this
    class too. A long value keeps its start and its end, where a path names its file."""

    def error(self, message: str) -> NoReturn:
        super().error(visible_lines(re.sub(r"[^\s'\"]{80,}", lambda m: m.group(0)[:24] + "..." + m.group(0)[-48:],
                                           message)))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that command is imported and registered, so a command does not pay
    the start-up time and memory of every other command's dependencies (textual, torch ...)."""
    parser = Parser(prog="gpuwatch", description=DESCRIPTION,
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


class VisibleFormatter(logging.Formatter):
    """Log lines with every control character but the newline written out: a process name or a config value
    quoted in a log line must not steer the terminal (or the journal viewer) it is read on."""

    def format(self, record: logging.LogRecord) -> str:
        return visible_lines(super().format(record))


def main(argv: Sequence[str] | None = None) -> int:
    argv = with_command(sys.argv[1:] if argv is None else argv)
    if [a for a in argv if not VERBOSE.fullmatch(a)][:1] == ["--version"]:
        print(f"gpuwatch {__version__}")  # as argparse would, without importing every command to say it
        return 0
    parser = build_parser(_chosen_command(argv))
    args = parser.parse_args(argv)
    handler = logging.StreamHandler()
    handler.setFormatter(VisibleFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                        handlers=[handler])
    return run_command(args)


#: Exit status of a bug (EX_SOFTWARE): told apart from a user's mistake (1) in scripts and tests.
EXIT_BUG = 70


def run_command(args: argparse.Namespace) -> int:
    """Run the chosen command; every failure a user can meet ends here as one line on stderr, so no command
    needs its own copy of this (a bad recording, a config, a special file, a full disk on output)."""
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a full disk behind stdout (> /dev/full) fails here, not at exit
        return code
    except CliError as exc:
        return _fail(str(exc), exc.exit_code)
    except InputError as exc:
        return _fail(str(exc), 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except OSError as exc:
        _quiet_stdout()
        output = getattr(args, "output", None)
        where = f"{exc.filename}: " if exc.filename else f"{output}: " if output else ""
        return _fail(f"{where}{exc.strerror or exc}", 1)
    except MemoryError:
        return _fail("out of memory (an input far bigger than it should be?)", 1)
    except Exception as exc:  # a bug: one line that says so, the traceback with -v
        if args.verbose:
            traceback.print_exception(exc)
        hint = "" if args.verbose else "; run with -v for the traceback"
        return _fail(f"internal error: {type(exc).__name__}: {str(exc)[:300]} (this is a bug{hint})", EXIT_BUG)


def _fail(message: str, code: int) -> int:
    print(f"gpuwatch: {visible_lines(message)}", file=sys.stderr)  # a quoted value cannot steer the terminal
    return code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush at exit cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
