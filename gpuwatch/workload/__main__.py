"""``python -m gpuwatch.workload``: the workload command alone, without loading every other command (the
dashboard's UI stack among them); ``gpuwatch validate`` starts each stage this way."""

from __future__ import annotations

import argparse
import sys

from gpuwatch.cli.common import CliError
from gpuwatch.cli.workload import register


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuwatch.workload")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["workload", *argv])
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"gpuwatch: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
