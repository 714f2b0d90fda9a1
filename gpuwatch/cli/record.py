"""``gpuwatch record``: write Snapshots to a gzip'd NDJSON file that any command can --replay."""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path

from gpuwatch.cli.common import CliError, add_sampling_args, open_from_args, positive_float
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.sampler.sampler import Sampler


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="record samples to a file for --replay",
                       description="Sample every --interval seconds and append each Snapshot to FILE "
                       "(gzip'd NDJSON when it ends in .gz). Each line is flushed as written, so an "
                       "interrupted recording keeps everything up to the interruption.")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                   help="where to write, e.g. trace.ndjson.gz")
    p.add_argument("--duration", type=positive_float, metavar="S", help="stop after S seconds (default: Ctrl-C)")
    p.add_argument("--description", default="", help="a note stored in the file's header")
    add_sampling_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.output.exists() and args.output.is_dir():
        raise CliError(f"{args.output} is a directory; give a file name such as trace.ndjson.gz")
    opened = open_from_args(args)
    header = RecordingHeader(created=time.time(), interval_s=args.interval, hostname=socket.gethostname(),
                             description=args.description, meta={"source": opened.description})
    done = threading.Event()
    try:
        writer = RecordingWriter(args.output, header)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror}") from None
    sampler = Sampler(opened.producer, interval=args.interval)
    sampler.subscribe(writer.write)
    start = time.monotonic()
    sampler.start()
    try:
        while not sampler.finished.is_set():
            if args.duration is not None and time.monotonic() - start >= args.duration:
                break
            done.wait(0.2)
            if sys.stderr.isatty():
                print(f"\rrecording {args.output}: {writer.count} samples, {time.monotonic() - start:5.0f} s",
                      end="", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
        writer.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"wrote {writer.count} samples to {args.output}", file=sys.stderr)
    return 0
