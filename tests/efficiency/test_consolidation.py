"""Consolidation advice: owners under-used for most of their allocated time, the smallest MIG profile their
peaks fit, MPS pairs under the ceilings, the GPU-hours a week freed; and nothing on less data than needed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from efficiency import fleet
from gpuwatch.cli.main import main
from gpuwatch.data import bundled_recording
from gpuwatch.efficiency import consolidation as c
from gpuwatch.efficiency.ledger import HOUR, Increment
from gpuwatch.efficiency.mig_profiles import FAMILIES, GIB, family_of
from gpuwatch.efficiency.offline import account_recording
from gpuwatch.efficiency.rows import GpuHour, Owner, OwnerKey, OwnerRow, OwnerUse, SecondsRow, States
from gpuwatch.efficiency.store import SCHEMA_VERSION, Rollup, Store
from gpuwatch.model.recording import iter_snapshots

WEEK = 7 * 86400.0


@pytest.fixture(scope="module")
def fleet_rollup() -> Rollup:
    store = fleet.build()
    try:
        return store.rollup().since(fleet.UNTIL - WEEK)
    finally:
        store.close()


def test_the_bundled_recording_is_not_enough_data_and_the_json_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--replay", "bundled", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cons = out["consolidation"]
    assert cons["status"] == "not_enough_data" and cons["advice"] == []
    # one GPU, so the watched time is the GPU's observed seconds
    assert cons["have_s"] == pytest.approx(out["gpu_hours"]["observed"] * 3600, rel=1e-6)
    assert cons["need_s"] == c.NEED_S > cons["have_s"]
    assert main(["report", "--replay", "bundled"]) == 0
    text = capsys.readouterr().out
    have = f"{cons['have_s'] / 3600:.1f} h"
    assert f"Consolidation: not enough data: have {have} of roll-ups over 1 day, need 72 h" in text


def test_every_under_used_owner_gets_the_smallest_profile_its_peaks_fit(fleet_rollup: Rollup) -> None:
    got = c.consolidate(fleet_rollup)
    assert got.status == "advice" and got.have_s == WEEK
    loads = {o.owner: o for o in c.loads(fleet_rollup)}
    under = {o.owner for o in got.underused}
    assert under == {o for o, load in loads.items() if load.underused_share > c.MOSTLY}
    assert fleet.TRAIN.text not in under and fleet.CHAT.text in under  # busy owners are left alone
    mig = {a.owners[0]: a for a in got.advice if a.kind == "mig"}
    assert set(mig) == under
    for owner, advice in mig.items():
        use = loads[owner].use
        profiles = family_of(use.mem_total).profiles  # type: ignore[union-attr]
        i = [p.name for p in profiles].index(advice.profile)
        assert c.fits(use, profiles[i]) and not any(c.fits(use, p) for p in profiles[:i])
        assert advice.freed_per_week_s == pytest.approx(use.allocated * (1 - profiles[i].gpu_fraction))


def test_a_pair_shares_a_gpu_only_under_both_ceilings_and_frees_the_smaller_allocation(fleet_rollup: Rollup) -> None:
    got = c.consolidate(fleet_rollup)
    pairs = [a for a in got.advice if a.kind == "mps"]
    assert pairs
    loads = {o.owner: o.use for o in c.loads(fleet_rollup)}
    for pair in pairs:
        a, b = (loads[o] for o in pair.owners)
        assert a.peak_sm + b.peak_sm == pair.peak_sm <= c.SM_CEILING
        assert a.peak_mem + b.peak_mem <= c.MEM_HEADROOM * min(a.mem_total, b.mem_total)
        assert pair.freed_per_week_s == min(a.allocated, b.allocated)
    paired = [o for p in pairs for o in p.owners]
    assert len(paired) == len(set(paired))  # nobody shares twice


def _rollup(hours: int, use: OwnerUse, owner: Owner = fleet.CHAT) -> Rollup:
    """``hours`` hours of one GPU held all the time by ``owner``."""
    rows = [OwnerRow(OwnerKey(h * HOUR, 0, owner), use) for h in range(hours)]
    seconds = [SecondsRow(GpuHour(h * HOUR, 0), States(HOUR, HOUR, use.effective, use.effective)) for h in range(hours)]
    return Rollup(seconds, [], {}, [], rows)


def _use(peak_sm: float, peak_gib: float, mem_total: float = fleet.H200_MEMORY) -> OwnerUse:
    return OwnerUse(HOUR, 0.05 * HOUR, HOUR, peak_sm, peak_gib * GIB, mem_total)


def test_nothing_is_advised_below_the_data_it_needs() -> None:
    short = c.consolidate(_rollup(71, _use(10, 5)))
    assert short.status == "not_enough_data" and short.advice == [] and short.have_s == 71 * HOUR
    assert c.consolidate(_rollup(72, _use(10, 5))).status == "advice"


def test_an_owner_with_less_than_a_working_day_allocated_is_not_judged() -> None:
    rollup = _rollup(72, _use(10, 5))
    few = Rollup(rollup.seconds, [], {}, [], [*rollup.owners, OwnerRow(OwnerKey(0, 1, fleet.NOTEBOOK),
                                                                              _use(10, 5))])
    got = c.consolidate(few)
    assert got.unjudged == 1 and fleet.NOTEBOOK.text not in {o.owner for o in got.underused}


def test_peaks_that_fit_no_slice_get_no_mig_advice_and_other_gpus_get_none() -> None:
    too_busy = c.consolidate(_rollup(72, _use(90, 5)))  # under-used on average, but its peak needs the GPU
    assert [a for a in too_busy.advice if a.kind == "mig"] == []
    a24 = c.consolidate(_rollup(72, _use(10, 5, mem_total=24 * GIB)))  # not an H100 80GB or an H200
    assert family_of(24 * GIB) is None and a24.underused and a24.advice == []
    assert [f.gpu for f in FAMILIES] == ["H100 80GB", "H200 141GB"]


def test_the_owner_rollups_carry_the_recordings_peaks() -> None:
    accounted = account_recording(bundled_recording())
    loads = c.loads(accounted.rollup)
    assert [o.owner for o in loads] == ["root:python3"]
    use = loads[0].use
    seconds = accounted.rollup.seconds
    assert use.allocated == pytest.approx(sum(r.states.allocated for r in seconds))
    assert use.effective == pytest.approx(sum(r.states.effective for r in seconds))
    snaps = list(iter_snapshots(bundled_recording()))
    assert use.peak_mem == max(g.mem_used_bytes or 0 for s in snaps for g in s.gpus)
    assert use.mem_total == snaps[-1].gpus[0].mem_total_bytes
    assert 0 < use.underused < use.allocated and 0 < use.peak_sm <= 100


def test_an_old_store_file_opens_with_its_rows_and_gains_owner_rows(tmp_path: Path) -> None:
    path = tmp_path / "efficiency.sqlite"
    db = sqlite3.connect(path)  # the schema before owner roll-ups: no owner_use table, user_version 0
    db.executescript("""
        CREATE TABLE gpu_seconds (hour INTEGER NOT NULL, gpu INTEGER NOT NULL, observed REAL NOT NULL,
            allocated REAL NOT NULL, busy REAL NOT NULL, effective REAL NOT NULL, PRIMARY KEY (hour, gpu));
        CREATE TABLE marks (origin TEXT PRIMARY KEY, until REAL NOT NULL);
        INSERT INTO gpu_seconds VALUES (0, 0, 3600, 3600, 100, 50);
        INSERT INTO marks VALUES ('live', 3600);""")
    db.close()
    store = Store(path, 366 * 86400.0)
    old = store.rollup()
    assert [r.states.observed for r in old.seconds] == [3600] and old.owners == [] and store.mark("live") == 3600
    inc = Increment(until=7200.0)
    inc.seconds[GpuHour(3600, 0)] = States(HOUR, HOUR, 10.0, 5.0)
    inc.owners[OwnerKey(3600, 0, fleet.CHAT)] = _use(10, 5)
    store.commit(inc, "live")
    store.commit(inc, "live")  # seconds add up, peaks keep the larger
    new = store.rollup()
    store.close()
    assert new.owners == [OwnerRow(OwnerKey(3600, 0, fleet.CHAT), _use(10, 5).plus(_use(10, 5)))]
    assert new.owners[0].use.allocated == 2 * HOUR and new.owners[0].use.peak_sm == 10
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert Rollup.from_dict(json.loads(json.dumps(new.to_dict()))) == new
