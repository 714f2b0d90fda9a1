"""Reading a file a user named (config, token, secret, rules, a recording) without trusting what it is.

A path can name a FIFO that never delivers a byte, a device that never ends (``/dev/zero``,
``/dev/urandom``), a directory or a socket. Reading such a thing "whole" hangs or fills memory, so every
reader goes through here: the file is opened without blocking, refused unless it is a regular file, and
read up to ``limit + 1`` bytes at most, so "too big" is known without reading the rest.

The errors are :class:`OSError` subclasses carrying ``filename`` and ``strerror``, so every caller's
existing ``except OSError`` turns them into its one-line message.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from typing import IO, Any

MIB = 1024 * 1024


class NotARegularFile(OSError):
    """The path names a directory, FIFO, device or socket: nothing gpuwatch reads is one of those."""


class FileTooBig(OSError):
    """The file holds more than the reader's limit."""


def kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words (for "X is a FIFO, not a regular file")."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of ``path``, which must be a regular file (after following links).
    Opened with O_NONBLOCK, so a FIFO with no writer cannot hang the open; the flag is cleared after the
    check (it means nothing for a regular file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(errno.EINVAL, f"{kind(mode)}, not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_binary(path: str | os.PathLike[str]) -> IO[bytes]:
    """A binary file object over :func:`open_regular` (for readers that stream, like recordings)."""
    return os.fdopen(open_regular(path), "rb")


def read_bytes(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes; :class:`FileTooBig` past it (read: limit + 1)."""
    with open_binary(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise FileTooBig(errno.EFBIG, f"larger than {_size(limit)} (the limit for this file)", str(path))
    return data


def read_text(path: str | os.PathLike[str], limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8 (UnicodeDecodeError for other bytes, as ``Path.read_text``)."""
    return read_bytes(path, limit).decode("utf-8")


class NotJSON(ValueError):
    """The file is not JSON (or nests deeper than the parser can follow)."""


def read_json(path: str | os.PathLike[str], limit: int) -> Any:
    """:func:`read_text` parsed as JSON; :class:`NotJSON` for anything that is not, nesting thousands deep
    included (the parser's RecursionError is a bad file, not a bug)."""
    text = read_text(path, limit)
    try:
        return json.loads(text)
    except RecursionError:
        raise NotJSON(f"nested deeper than {sys.getrecursionlimit()} levels") from None
    except ValueError as exc:  # JSONDecodeError, and an integer of thousands of digits
        raise NotJSON(str(exc)[:200]) from None


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB and n % MIB == 0 else f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} bytes"


def describe(exc: OSError) -> str:
    """One phrase for a read failure: ``strerror`` when there is one (the filename is said by the caller)."""
    return exc.strerror or str(exc) or type(exc).__name__


__all__ = ["FileTooBig", "NotARegularFile", "NotJSON", "describe", "open_binary", "open_regular", "read_bytes",
           "read_json", "read_text"]
