"""Recordings: a gzip'd NDJSON file, one header line then one Snapshot per line.

Recording is "write Snapshots", replay is "read them back": nothing else is needed, and a recording made
by ``gpuwatch record`` on a GPU machine replays anywhere. Each line is flushed as it is written so a
crash loses at most the line being written; a truncated last line is skipped on reading.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gpuwatch.model.codec import SnapshotFormatError, dumps, snapshot_from_dict
from gpuwatch.model.snapshot import Snapshot

MAGIC = "gpuwatch_recording"
FORMAT_VERSION = 1


class RecordingError(ValueError):
    """A recording that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class RecordingHeader:
    created: float
    interval_s: float
    hostname: str = ""
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def _open_text(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, mode + "b"), encoding="utf-8")  # type: ignore[type-var]
    return open(path, mode, encoding="utf-8")


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
            first = fh.readline()
    except FileNotFoundError:
        raise RecordingError(f"{p}: no such file") from None
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{p}: not a gpuwatch recording ({exc})") from None
    try:
        head = json.loads(first)
    except json.JSONDecodeError:
        head = None
    if not isinstance(head, dict) or MAGIC not in head:
        raise RecordingError(f"{p}:1: not a gpuwatch recording (no header line; make one with 'gpuwatch record')")
    if head[MAGIC] != FORMAT_VERSION:
        raise RecordingError(f"{p}:1: recording format {head[MAGIC]} is not supported")
    return RecordingHeader(created=float(head.get("created", 0)), interval_s=float(head.get("interval_s", 1.0)),
                           hostname=str(head.get("hostname", "")), description=str(head.get("description", "")),
                           meta=dict(head.get("meta") or {}))


def iter_snapshots(path: str | os.PathLike[str]) -> Iterator[Snapshot]:
    """Snapshots in file order. A bad line raises RecordingError with ``file:line``; a cut-off last line is
    ignored (the writer was killed mid-line)."""
    p = Path(path)
    read_header(p)
    with _open_text(p, "r") as fh:
        fh.readline()
        lineno = 1
        pending: tuple[int, str] | None = None
        try:
            for line in fh:
                lineno += 1
                if pending is not None:
                    yield _parse(p, *pending)
                pending = (lineno, line)
        except (EOFError, gzip.BadGzipFile, OSError, UnicodeDecodeError):
            return  # a gzip stream cut off by a crash: keep what was complete
        if pending is not None:
            lineno, line = pending
            if line.endswith("\n"):
                yield _parse(p, lineno, line)


def _parse(path: Path, lineno: int, line: str) -> Snapshot:
    try:
        return snapshot_from_dict(json.loads(line))
    except (json.JSONDecodeError, SnapshotFormatError, TypeError, ValueError) as exc:
        raise RecordingError(f"{path}:{lineno}: {exc}") from None


def load(path: str | os.PathLike[str]) -> list[Snapshot]:
    return list(iter_snapshots(path))
