"""The accounting works on each Snapshot as the sampler offers it and hands its worker thread only what may
wait on the disk (a block's commit). Work that rides it (the rollout detector) takes every Snapshot, in order,
after the accounting took it; a rider that fails on one Snapshot neither stops the accounting nor misses the
next."""

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


def test_the_worker_thread_gets_a_job_per_block_not_per_snapshot_and_the_counters_move_every_tick() -> None:
    accounting = Accounting(Store(None, 86400.0), 1.0, 16)  # its worker not started: the jobs stay queued
    for i in range(10):  # one block is 10 s of snapshot time: not finished yet
        accounting.offer(dataclasses.replace(full_snapshot(1000.0 + i), seq=i))
    assert accounting.backlog == 0
    assert sum(s.observed for s in accounting.totals.seconds.values()) == 9.0 * len(full_snapshot(0.0).gpus)
    accounting.offer(dataclasses.replace(full_snapshot(1010.0), seq=10))
    assert accounting.backlog == 1 and accounting.commits == 0
    accounting.start()
    accounting.stop()
    assert accounting.commits >= 1 and accounting.backlog == 0
