"""The accounting over a recording, without a daemon: the same ledger, an in-memory store.

``gpuwatch report --replay FILE`` and the tests use it; a daemon replaying the same file with
``--replay`` commits the same roll-ups (the ledger follows snapshot time, not the wall clock).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpuwatch.efficiency.ledger import Ledger
from gpuwatch.efficiency.service import GAP_INTERVALS
from gpuwatch.efficiency.store import Rollup, Store
from gpuwatch.model.recording import iter_snapshots, read_header

YEAR = 366 * 86400.0


@dataclass(frozen=True)
class Accounted:
    rollup: Rollup
    #: First and last snapshot time of the recording.
    start: float
    end: float


def account_recording(path: str | os.PathLike[str]) -> Accounted:
    """Every interval of the recording at ``path``, attributed and rolled up by hour."""
    header = read_header(path)
    store = Store(None, YEAR)
    ledger = Ledger(max(5.0, GAP_INTERVALS * header.interval_s), interval=header.interval_s)
    start: float | None = None
    end = 0.0
    for snap in iter_snapshots(path):
        start = snap.time if start is None else start
        inc = ledger.add(snap)
        end = ledger.last_time or snap.time  # where a clock that did not move forward was counted on to
        if inc:
            store.commit(inc, "recording")
    last = ledger.flush()
    if last:
        store.commit(last, "recording")
    rollup = store.rollup()
    store.close()
    return Accounted(rollup, end if start is None else start, end)
