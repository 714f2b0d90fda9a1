"""The processes a GPU process waits on: its children, and the siblings and other processes at the other end of
its pipes, sockets and shared memory.

A GPU process whose feeding thread sleeps on a pipe, a queue or a socket is explained only once what it
waits for is found. The host source follows those waits and puts one ``FeederSample`` per such process on
the Snapshot, so the doctor can name the feeder (busy on a core, in storage I/O, on the GIL, compiling)
instead of calling the GPU process demand-bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: How a feeder relates to the GPU process it feeds.
Relation = Literal["child", "sibling", "peer"]
#: Where the GPU process's work comes from, as far as its connections tell: ``external``: an accepted
#: connection whose other end is outside this host's process tree (real demand); ``tree``: only pipes and
#: sockets to processes of its own tree; ``unknown``: nothing could be read.
Upstream = Literal["external", "tree", "unknown"]


@dataclass(frozen=True, slots=True)
class FeederSample:
    """One process that feeds GPU process ``feeds`` (not itself on a GPU), read like a GPU process's host side."""

    pid: int
    feeds: int
    relation: Relation
    name: str | None = None
    cmdline: str | None = None
    cpu_percent: float | None = None
    top_thread_cpu_percent: float | None = None
    num_threads: int | None = None
    #: Wait class of each of its working threads at the sample (``model.thread_wait``).
    thread_waits: tuple[str, ...] = ()
    run_wait_percent: float | None = None
    threads_in_io_wait: int | None = None
    io_read_bytes_s: float | None = None
    io_write_bytes_s: float | None = None
