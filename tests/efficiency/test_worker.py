"""Work that rides the accounting's thread (the rollout detector): every Snapshot, in order, after the
accounting took it; a rider that fails on one Snapshot neither stops the accounting nor misses the next."""

from __future__ import annotations

import dataclasses

from core.factories import full_snapshot

from gpuwatch.efficiency.service import Accounting
from gpuwatch.efficiency.store import Store
from gpuwatch.model.snapshot import Snapshot


class Recorder:
    def __init__(self, accounting: Accounting, fail_at: float | None = None) -> None:
        self.accounting = accounting
        self.fail_at = fail_at
        self.seen: list[tuple[float, float | None]] = []
        self.finished: list[int] = []

    def take(self, snap: Snapshot) -> None:
        self.seen.append((snap.time, self.accounting.last_time))
        if snap.time == self.fail_at:
            raise RuntimeError("a bug in the rider")

    def finish(self) -> None:
        self.finished.append(len(self.seen))


def test_a_rider_takes_every_snapshot_in_order_after_the_accounting_and_finishes_at_the_stop() -> None:
    accounting = Accounting(Store(None, 86400.0), 1.0, 16)
    good, failing = Recorder(accounting), Recorder(accounting, fail_at=1005.0)
    accounting.carry(failing)
    accounting.carry(good)
    accounting.start()
    times = [1000.0 + i for i in range(40)]
    for i, t in enumerate(times):
        accounting.offer(dataclasses.replace(full_snapshot(t), seq=i))
    accounting.stop()
    assert good.seen == [(t, t) for t in times]  # the accounting had taken each one first
    assert failing.seen == good.seen  # its failure on one did not cost it the next ones
    assert good.finished == failing.finished == [len(times)]
    assert accounting.last_time == times[-1] and accounting.commits >= 1
