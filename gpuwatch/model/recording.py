"""Recordings: a gzip'd NDJSON file, one header line then one Snapshot per line.

Recording is "write Snapshots", replay is "read them back": nothing else is needed, and a recording made
by ``gpuwatch record`` on a GPU machine replays anywhere. Each line is flushed as it is written so a
crash loses at most the line being written; a truncated last line is skipped on reading.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import math
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gpuwatch.model import files, text
from gpuwatch.model.codec import MAX_TIME, SnapshotFormatError, dropped_by_cap, dumps, snapshot_from_dict
from gpuwatch.model.errors import InputError
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)
MIB = 1024 * 1024
#: Longest line read (a snapshot of a busy 8-GPU machine is well under 1 MiB).
MAX_LINE_CHARS = 16 * MIB
MAGIC = "gpuwatch_recording"
FORMAT_VERSION = 1


class RecordingError(InputError):
    """A recording that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class RecordingHeader:
    created: float
    interval_s: float
    hostname: str = ""
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def _open_text(path: Path, mode: str) -> IO[str]:
    """Reading: a regular file only (a FIFO or /dev/zero would hang or never end), gzip'd by its suffix."""
    raw: IO[bytes] = files.open_binary(path) if mode == "r" else open(path, mode + "b")  # noqa: SIM115
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode=mode + "b"), encoding="utf-8")
    return io.TextIOWrapper(raw, encoding="utf-8")


class RecordingWriter:
    """Appends Snapshots to a recording; use as a context manager."""

    def __init__(self, path: str | os.PathLike[str], header: RecordingHeader) -> None:
        self.path = Path(path)
        self._fh = _open_text(self.path, "w")
        head = {MAGIC: FORMAT_VERSION, "created": header.created, "interval_s": header.interval_s,
                "hostname": header.hostname, "description": header.description, "meta": header.meta}
        self._fh.write(json.dumps(head) + "\n")
        self.count = 0

    def write(self, snap: Snapshot) -> None:
        self._fh.write(dumps(snap) + "\n")
        self._fh.flush()
        self.count += 1

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_header(path: str | os.PathLike[str]) -> RecordingHeader:
    p = Path(path)
    try:
        with _open_text(p, "r") as fh:
            first = fh.readline(MAX_LINE_CHARS)
    except FileNotFoundError:
        raise RecordingError(f"{p}: no such file") from None
    except OSError as exc:
        raise RecordingError(f"{p}: cannot read it as a gpuwatch recording ({files.describe(exc)})") from None
    except (EOFError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{p}: not a gpuwatch recording ({exc})") from None
    try:
        head = json.loads(first)
    except (ValueError, RecursionError):  # also an integer of thousands of digits (ValueError, not JSON's)
        head = None
    if not isinstance(head, dict) or MAGIC not in head:
        raise RecordingError(f"{p}:1: not a gpuwatch recording (no header line; make one with 'gpuwatch record')")
    if type(head[MAGIC]) is not int or head[MAGIC] != FORMAT_VERSION:  # true == 1 in Python; not here
        raise RecordingError(f"{p}:1: recording format {_shown(head[MAGIC])} is not supported (this gpuwatch "
                             f"reads format {FORMAT_VERSION})")
    created, interval = head.get("created", 0), head.get("interval_s", 1.0)
    texts, meta = (head.get("hostname", ""), head.get("description", "")), head.get("meta") or {}
    for name, value, top in (("created", created, MAX_TIME), ("interval_s", interval, 86_400.0)):
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or not 0 <= value <= top):
            raise RecordingError(f"{p}:1: header field '{name}' must be a number from 0 to {top:.0f}, "
                                 f"got {_shown(value)}")
    if not interval > 0 or not all(isinstance(t, str) for t in texts) or not isinstance(meta, dict):
        raise RecordingError(f"{p}:1: the header is damaged (interval_s must be above 0, hostname and "
                             f"description strings, meta an object)")
    return RecordingHeader(created=float(created), interval_s=float(interval), hostname=text.clean(texts[0]),
                           description=text.clean(texts[1]), meta=dict(meta))


def _shown(value: object) -> str:
    """A value for a message, short (str() of an int of 5 000 digits even raises ValueError)."""
    if isinstance(value, int) and not -10**40 < value < 10**40:
        return "a number of more than 40 digits"
    return json.dumps(value)[:40] if not isinstance(value, str) else repr(value[:40])


def iter_snapshots(path: str | os.PathLike[str]) -> Iterator[Snapshot]:
    """Snapshots in file order. A bad line raises RecordingError with ``file:line``; a cut-off last line is
    ignored (the writer was killed mid-line)."""
    p = Path(path)
    read_header(p)
    with _open_text(p, "r") as fh:
        fh.readline(MAX_LINE_CHARS)
        lineno = 1
        pending: tuple[int, str] | None = None
        warned: set[str] = set()
        try:
            while line := fh.readline(MAX_LINE_CHARS + 1):  # bounded: one huge line must not fill memory
                lineno += 1
                if len(line) > MAX_LINE_CHARS:
                    raise RecordingError(f"{p}:{lineno}: a line longer than {MAX_LINE_CHARS // MIB} MiB is not "
                                         f"a snapshot")
                if pending is not None:
                    yield _warn_if_capped(p, *pending, warned)
                pending = (lineno, line)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError, UnicodeDecodeError) as exc:
            # A gzip stream cut off by a crash: keep what was complete, and say so.
            log.warning("%s: the file ends early after line %d (%s); replaying what is complete", p,
                        lineno, exc.__class__.__name__)
            return
        if pending is not None:
            lineno, line = pending
            if line.endswith("\n"):
                yield _warn_if_capped(p, lineno, line, warned)
            else:
                log.warning("%s:%d: the last line is cut off (the recorder was stopped mid-write); skipped",
                            p, lineno)


def _warn_if_capped(path: Path, lineno: int, line: str, warned: set[str]) -> Snapshot:
    snap = _parse(path, lineno, line)
    dropped = dropped_by_cap(snap)
    if dropped is not None and not warned:
        warned.add(dropped)
        log.warning("%s:%d: %s (more is not one machine; later lines that are capped are not logged)", path,
                    lineno, dropped)
    return snap


def _parse(path: Path, lineno: int, line: str) -> Snapshot:
    try:
        return snapshot_from_dict(json.loads(line))
    except (json.JSONDecodeError, SnapshotFormatError, TypeError, ValueError, AttributeError) as exc:
        why = "a number of thousands of digits" if "integer string conversion" in str(exc) else str(exc)[:300]
        raise RecordingError(f"{path}:{lineno}: {why}") from None
    except RecursionError:
        raise RecordingError(f"{path}:{lineno}: nested too deeply to be a snapshot") from None


def recording_span(path: str | os.PathLike[str]) -> tuple[float | None, float]:
    """(first, last) snapshot time of a recording, in one streamed pass (a looping replay asks it to know its
    period); (None, 0.0) when it holds none."""
    first: float | None = None
    last = 0.0
    for snap in iter_snapshots(path):
        first = snap.time if first is None else first
        last = snap.time
    return first, last


def load(path: str | os.PathLike[str]) -> list[Snapshot]:
    return list(iter_snapshots(path))
