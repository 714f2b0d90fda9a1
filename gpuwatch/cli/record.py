"""``gpuwatch record``: write Snapshots to a gzip'd NDJSON file that any command can --replay, or cut a
piece out of a recording (``--replay F --from S --to S``) to share the interesting minute."""

from __future__ import annotations

import argparse
import dataclasses
import socket
import sys
import threading
import time

from gpuwatch.cli.common import (
    CliError,
    add_sampling_args,
    open_options,
    options_from_args,
    positive_float,
    seconds_offset,
)
from gpuwatch.cli.paths import output_file
from gpuwatch.model.recording import RecordingError, RecordingHeader, RecordingWriter, iter_snapshots, read_header
from gpuwatch.model.visible import visible
from gpuwatch.sources.stack_source import DOCTOR_EVERY_S


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="record samples to a file for --replay",
                       description="Sample every --interval seconds and append each Snapshot to FILE "
                       "(gzip'd NDJSON when it ends in .gz). Each line is flushed as written, so an "
                       "interrupted recording keeps everything up to the interruption.")
    p.add_argument("-o", "--output", type=output_file, required=True, metavar="FILE",
                   help="where to write, e.g. trace.ndjson.gz")
    p.add_argument("--duration", type=positive_float, metavar="S", help="stop after S seconds (default: Ctrl-C)")
    p.add_argument("--description", default="", help="a note stored in the file's header")
    p.add_argument("--from", dest="start", type=seconds_offset, metavar="S",
                   help="with --replay: cut from S seconds into the recording (default its start)")
    p.add_argument("--to", dest="end", type=seconds_offset, metavar="S",
                   help="with --replay: cut up to S seconds into the recording (default its end; or --from "
                   "plus --duration)")
    add_sampling_args(p)
    p.set_defaults(func=run)


def cut(args: argparse.Namespace) -> int:
    """Copy the snapshots between --from and --to (seconds from the recording's first snapshot), as fast as
    they read: a cut of an hour-long recording takes a second, not an hour."""
    start = args.start or 0.0
    end = args.end if args.end is not None else (start + args.duration if args.duration is not None else None)
    if end is not None and end <= start:
        raise CliError(f"--to {end:g} must be later than --from {start:g}", exit_code=2)
    if args.output.resolve() == args.replay.resolve():
        raise CliError("-o names the recording being read; write the piece to another file", exit_code=2)
    try:
        source = read_header(args.replay)
        span = f"{start:g}-{'end' if end is None else f'{end:g}'} s of {args.replay.name}"
        header = RecordingHeader(created=source.created, interval_s=source.interval_s, hostname=source.hostname,
                                 description=args.description or f"{source.description} ({span})".strip(),
                                 meta={**source.meta, "cut_from": args.replay.name, "cut_span_s": [start, end]})
        first = last = None
        with RecordingWriter(args.output, header) as writer:
            for snap in iter_snapshots(args.replay):
                first = snap.time if first is None else first
                last = snap.time - first
                if end is not None and last > end:
                    break
                if last >= start:
                    writer.write(snap)
    except RecordingError as exc:
        raise CliError(str(exc), exit_code=2) from None
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror}") from None
    if writer.count == 0:
        args.output.unlink(missing_ok=True)
        raise CliError(f"--from {start:g}: the recording is {last or 0:.1f} s long; nothing to cut", exit_code=2)
    print(f"wrote {writer.count} samples ({span}) to {visible(args.output)}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.output.exists() and args.output.is_dir():
        raise CliError(f"{args.output} is a directory; give a file name such as trace.ndjson.gz")
    if args.replay is not None:
        return cut(args)
    if args.start is not None or args.end is not None:
        raise CliError("--from and --to cut a recording: give --replay FILE", exit_code=2)
    # a recording is evidence kept for the doctor: stack windows at the doctor's pace, so a replay sees what
    # a live doctor would
    opened = open_options(dataclasses.replace(options_from_args(args), stacks_every_s=DOCTOR_EVERY_S))
    header = RecordingHeader(created=time.time(), interval_s=args.interval, hostname=socket.gethostname(),
                             description=args.description, meta={"source": opened.description})
    done = threading.Event()
    try:
        writer = RecordingWriter(args.output, header)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror}") from None
    sampler = opened.sampler
    sampler.subscribe(writer.write)
    start = time.monotonic()
    sampler.start()
    try:
        while not sampler.finished.is_set():
            if args.duration is not None and time.monotonic() - start >= args.duration:
                break
            done.wait(0.2)
            if sys.stderr.isatty():
                print(f"\rrecording {visible(args.output)}: {writer.count} samples, {time.monotonic() - start:5.0f} s",
                      end="", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
        writer.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"wrote {writer.count} samples to {visible(args.output)}", file=sys.stderr)
    return 0
