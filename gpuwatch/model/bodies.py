"""Reading what a peer sends over the network, bounded.

A body is read in chunks up to a limit, and a stream of lines up to a longest line: a daemon, an exporter
or a receiver that answers 200 and never stops (or sends one line without end) must cut the read, not grow
this process's memory until the kernel kills it. Works on any iterable of byte chunks (``requests``'
``iter_content``), so the callers choose their HTTP client.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from gpuwatch.model.errors import InputError

KIB = 1024
MIB = 1024 * KIB
#: A JSON answer of a gpuwatch daemon (/healthz, alerts, findings, a day of roll-ups) is well under this.
MAX_JSON_BYTES = 32 * MIB
#: One NDJSON line of /api/v1/stream: a Snapshot (a busy 8-GPU machine's is well under 1 MiB); as a recording's.
MAX_LINE_BYTES = 16 * MIB
#: Chunks read at a time.
CHUNK = 64 * KIB


class BodyTooLarge(InputError):
    """A body or a line past its limit; the message says which and the limit."""


def read_capped(chunks: Iterable[bytes], limit: int, what: str) -> bytes:
    """The whole body, or BodyTooLarge once more than ``limit`` bytes came (the rest is not read)."""
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if len(buf) > limit:
            raise BodyTooLarge(f"{what} sent more than {_size(limit)}; not read further")
    return bytes(buf)


def capped_lines(chunks: Iterable[bytes], max_line: int, what: str) -> Iterator[bytes]:
    """The lines of a stream without their line ends (empty ones skipped); BodyTooLarge for a line longer
    than ``max_line``. Memory stays within one line and one chunk whatever the peer sends."""
    pending = bytearray()
    for chunk in chunks:
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", start)) >= 0:
            line = bytes(pending[start:end]).rstrip(b"\r")
            start = end + 1
            if len(line) > max_line:
                raise BodyTooLarge(f"{what} sent a line of more than {_size(max_line)}")
            if line:
                yield line
        del pending[:start]
        if len(pending) > max_line:
            raise BodyTooLarge(f"{what} sent a line of more than {_size(max_line)}")
    if pending.strip():
        yield bytes(pending).rstrip(b"\r")


def _size(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n / KIB:g} KiB"


def response_chunks(resp: Any) -> Iterator[bytes]:
    """A streamed ``requests`` response's bytes as they arrive (``read1``: what is there, up to a chunk);
    ``iter_content(n)`` would wait for ``n`` bytes, and a stream of one small line a second would lag."""
    read1 = getattr(resp.raw, "read1", None)
    if read1 is None:
        return iter(resp.iter_content(4 * KIB))
    return iter(lambda: read1(CHUNK, decode_content=True), b"")
