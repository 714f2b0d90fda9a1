"""A Snapshot kept in the History shares the values that did not change with the one before it.

Most of a Snapshot repeats the last: a GPU's name, UUID and limits, a process's user, command line and
thread waits, the hostname, every memory total. Each source builds them afresh every tick (a replay decodes
them afresh from JSON), so ten minutes of history held 600 copies of each: the bundled recording's snapshots
(1 GPU, 1-2 processes) took 5.0 KiB each apart and take 3.3 KiB in a History. Sharing puts
the previous snapshot's equal object in place of the new one, field by field, so a repeated value is kept
once however long the history. The records stay the same objects with equal values: nothing a reader sees
changes (a float's sign is part of its value: a zero is never shared).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Snapshot

_PLAIN = (str, int, float)
Record = GpuSample | ProcessSample | HostSample


@functools.cache
def _fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _plain(items: tuple[Any, ...]) -> bool:
    """A tuple of strings and numbers, none of them a zero float (whose sign equality would not see)."""
    return all(type(x) in _PLAIN and (type(x) is not float or x != 0.0) for x in items)


def _share_fields(new: Record, old: Record) -> None:
    cls: type = type(new)
    for name in _fields(cls):
        a = getattr(new, name)
        if a is None:  # most optional fields, and a singleton already
            continue
        b = getattr(old, name)
        if a is b or type(a) is not type(b) or a != b:
            continue
        t = type(a)
        if t is str or t is int or (t is float and a != 0.0) or (t is tuple and _plain(a)):
            object.__setattr__(new, name, b)  # an equal immutable value in a frozen record: readers see no change


def share_unchanged(new: Snapshot, old: Snapshot | None) -> None:
    """Give ``new``'s GPUs (by index and UUID), processes (by pid and GPU) and host the values of ``old``'s
    that are equal to theirs."""
    if old is None:
        return
    gpus: dict[tuple[int, str], GpuSample] = {(g.index, g.uuid): g for g in old.gpus}
    for g in new.gpus:
        before = gpus.get((g.index, g.uuid))
        if before is not None:
            _share_fields(g, before)
    procs: dict[tuple[int, int], ProcessSample] = {(p.pid, p.gpu_index): p for p in old.processes}
    for p in new.processes:
        prev = procs.get((p.pid, p.gpu_index))
        if prev is not None:
            _share_fields(p, prev)
    host: HostSample = new.host
    if host.hostname == old.host.hostname:
        _share_fields(host, old.host)
