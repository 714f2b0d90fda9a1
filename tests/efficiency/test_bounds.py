"""What keeps the accounting bounded: roll-ups older than the retention are deleted, one owner cap bounds
the owners the file and /metrics name (and both name the same ones), and the one-shot charts draw on a
terminal."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import plotext
import pytest
from core.factories import full_gpu, full_process, full_snapshot

from gpuwatch.cli.charts import Panel, render
from gpuwatch.config import Config
from gpuwatch.daemon.accounting import open_store
from gpuwatch.daemon.parts import StartError
from gpuwatch.efficiency.ledger import HOUR, Increment, Ledger
from gpuwatch.efficiency.metrics import Totals
from gpuwatch.efficiency.rows import MAX_OWNERS, OTHER_OWNER, GpuHour, LostKey, Owner, States
from gpuwatch.efficiency.store import Store


def _inc(hour: int, owners: int, until: float) -> Increment:
    inc = Increment(until=until)
    inc.seconds[GpuHour(hour, 0)] = States(10.0, 10.0, 5.0, 2.0)
    for i in range(owners):
        inc.lost[LostKey(hour, 0, "launch_bound", Owner(user="svc", command=f"worker-{i}"))] = 1.0
    return inc


def test_hours_older_than_the_retention_are_deleted_as_time_moves_on() -> None:
    store = Store(None, retention_s=2 * HOUR)
    for h in range(5):
        store.commit(_inc(h * HOUR, 1, h * HOUR + 1800.0), "live")
    assert [r.key.hour for r in store.rollup().seconds] == [2 * HOUR, 3 * HOUR, 4 * HOUR]
    assert store.mark("live") == 4 * HOUR + 1800.0


def test_one_cap_names_the_same_owners_in_the_rollups_and_on_metrics_and_drops_no_second() -> None:
    """The biggest memory holder of an idle GPU changes every 10 s, six owners in a minute, and six new ones
    an hour later; the cap is three. The roll-ups name three per hour, /metrics three in all."""
    workers = [dataclasses.replace(full_process(100 + i), name=f"worker-{i}", pod=None,
                                   gpu_memory_bytes=(20 - i) << 20)
               for i in range(12)]
    idle = dataclasses.replace(full_gpu(0, 0.0), profiling={}, labels={})
    snaps = [dataclasses.replace(full_snapshot(start + t), gpus=(idle,), processes=tuple(workers[first + t // 10:]))
             for start, first in ((1000.0, 0), (1000.0 + HOUR, 6)) for t in range(60)]
    store, totals = Store(None, 86400.0), Totals(max_owners=3)
    ledger = Ledger(max_gap=5.0, doctor=lambda window: [], max_owners=3)
    for inc in [*(ledger.add(s) for s in snaps), ledger.flush()]:
        if inc:
            store.commit(inc, "test")
            totals.add(inc)
    first_hour = {r.key.owner for r in store.rollup().lost if r.key.hour == 0}
    second_hour = {r.key.owner for r in store.rollup().lost if r.key.hour == HOUR}
    on_metrics = {owner for (_, _, owner) in totals.lost}
    assert first_hour == on_metrics and len(first_hour) == 4 and OTHER_OWNER in first_hour
    assert len(second_hour) == 4 and OTHER_OWNER in second_hour and not (second_hour & first_hour) - {OTHER_OWNER}
    assert sum(r.seconds for r in store.rollup().lost) == pytest.approx(118.0)  # nothing dropped, only folded
    assert sum(totals.lost.values()) == pytest.approx(118.0)
    assert [f.name for f in totals.families()] == ["gpuwatch_gpu_seconds", "gpuwatch_gpu_lost_seconds"]


def test_charts_draw_each_panel_one_above_the_other() -> None:
    hours = ["10:00", "11:00"]
    text = plotext.uncolorize(render([Panel("efficiency per hour", hours, {"efficiency": [40.0, 80.0]}, bars=True),
                                      Panel("lost GPU-hours per hour", hours, {"lost": [0.6, 0.2]}, bars=True)],
                                     width=80))
    assert text.index("efficiency per hour") < text.index("lost GPU-hours per hour")
    assert text.count("█") > 100 and text.count("┌") == 2  # two frames, both with bars



def test_a_damaged_rollup_file_is_moved_aside_and_a_fresh_one_started(tmp_path: Path) -> None:
    path = tmp_path / "efficiency.sqlite"
    path.write_bytes(b"not a database, " * 512)
    store = open_store(path, HOUR)
    store.commit(_inc(0, 1, 10.0), "live")
    assert store.mark("live") == 10.0
    store.close()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("efficiency.sqlite.corrupt-")]


def test_a_state_directory_that_cannot_be_made_stops_the_start_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(StartError, match=r"set state_dir in \[daemon\] to a writable directory"):
        open_store(tmp_path / "a-file" / "efficiency.sqlite", HOUR)


def test_the_accounting_backlog_is_bounded_and_a_stuck_worker_loses_counted_blocks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots are accounted as they come; the blocks to write wait for the worker, at most BACKLOG of them,
    and a stuck worker's later blocks are dropped and counted (their GPU-seconds never reach the store)."""
    import dataclasses

    from core.factories import full_snapshot

    from gpuwatch.efficiency import service, worker

    monkeypatch.setattr(worker, "BACKLOG", 3)
    monkeypatch.setattr(worker, "PUT_TIMEOUT_S", 0.01)
    accounting = service.Accounting(Store(None, 86400.0), 1.0, 16)  # its worker never started: stuck
    for i in range(61):  # a block each STEP_S (10 s) of snapshot time: six blocks
        accounting.offer(dataclasses.replace(full_snapshot(1000.0 + i), seq=i))
    assert accounting.last_time == 1060.0  # every snapshot was accounted
    assert accounting.backlog == 3 and accounting.dropped == 3 and accounting.commits == 0


def test_a_replay_faster_than_the_worker_waits_for_it_and_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from core.factories import full_snapshot

    from gpuwatch.efficiency import service, worker

    monkeypatch.setattr(worker, "BACKLOG", 4)
    accounting = service.Accounting(Store(None, 86400.0), 1.0, 16)
    accounting.start()
    for i in range(200):
        accounting.offer(dataclasses.replace(full_snapshot(1000.0 + i), seq=i))
    accounting.stop()
    assert accounting.dropped == 0 and accounting.last_time == 1199.0


def test_a_recording_is_capped_as_a_daemon_with_the_default_config_is() -> None:
    """``report --replay`` names as many owners as a default daemon does, so their owner tables agree."""
    assert Config().daemon.max_process_series == MAX_OWNERS
