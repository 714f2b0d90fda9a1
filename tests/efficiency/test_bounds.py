"""What keeps the accounting bounded: roll-ups older than the retention are deleted, each (hour, GPU)
keeps a bounded number of owners in the file, /metrics a bounded number of owner label sets, and the
one-shot charts draw on a terminal."""

from __future__ import annotations

from pathlib import Path

import plotext
import pytest

from gpuwatch.cli.charts import Panel, render
from gpuwatch.daemon.accounting import open_store
from gpuwatch.daemon.parts import StartError
from gpuwatch.efficiency.ledger import HOUR, Increment
from gpuwatch.efficiency.metrics import OTHER, Totals
from gpuwatch.efficiency.store import MAX_OWNERS, OTHER_OWNER, Store


def _inc(hour: int, owners: int, until: float) -> Increment:
    inc = Increment(until=until)
    inc.seconds[(hour, 0)] = [10.0, 10.0, 5.0, 2.0]
    for i in range(owners):
        inc.lost[(hour, 0, "launch_bound", ("", "", "", "svc", f"worker-{i}"))] = 1.0
    return inc


def test_hours_older_than_the_retention_are_deleted_as_time_moves_on() -> None:
    store = Store(None, retention_s=2 * HOUR)
    for h in range(5):
        store.commit(_inc(h * HOUR, 1, h * HOUR + 1800.0), "live")
    assert [r[0] for r in store.rollup().seconds] == [2 * HOUR, 3 * HOUR, 4 * HOUR]
    assert store.mark("live") == 4 * HOUR + 1800.0


def test_an_hour_keeps_at_most_max_owners_and_adds_the_rest_under_other() -> None:
    store = Store(None, retention_s=HOUR)
    store.commit(_inc(0, MAX_OWNERS + 40, 10.0), "live")
    lost = store.rollup().lost
    owners = {tuple(r[3:8]) for r in lost}
    assert len(owners) == MAX_OWNERS and OTHER_OWNER in owners
    assert sum(r[-1] for r in lost) == MAX_OWNERS + 40  # nothing dropped, only folded


def test_metrics_cap_owner_label_sets_and_keep_every_second() -> None:
    totals = Totals(max_owners=3)
    totals.add(_inc(0, 10, 10.0))
    owners = {owner for (_, _, owner) in totals.lost}
    assert len(owners) == 4 and OTHER in owners  # three kept, the rest under (other)
    assert sum(totals.lost.values()) == 10.0
    names = [f.name for f in totals.families()]
    assert names == ["gpuwatch_gpu_seconds", "gpuwatch_gpu_lost_seconds"]


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


def test_the_accounting_backlog_is_bounded_and_a_stuck_worker_loses_counted_snapshots(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from core.factories import full_snapshot

    from gpuwatch.efficiency import service

    monkeypatch.setattr(service, "BACKLOG", 8)
    monkeypatch.setattr(service, "PUT_TIMEOUT_S", 0.01)
    accounting = service.Accounting(Store(None, 86400.0), 1.0, 16)  # its worker never started: stuck
    for i in range(12):
        accounting.offer(dataclasses.replace(full_snapshot(1000.0 + i), seq=i))
    assert accounting.backlog == 8 and accounting.dropped == 4


def test_a_replay_faster_than_the_worker_waits_for_it_and_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from core.factories import full_snapshot

    from gpuwatch.efficiency import service

    monkeypatch.setattr(service, "BACKLOG", 4)
    accounting = service.Accounting(Store(None, 86400.0), 1.0, 16)
    accounting.start()
    for i in range(200):
        accounting.offer(dataclasses.replace(full_snapshot(1000.0 + i), seq=i))
    accounting.stop()
    assert accounting.dropped == 0 and accounting.last_time == 1199.0
