"""``gpuwatch snapshot``'s table names what is wrong with a GPU's health, and says nothing when all is well."""

from __future__ import annotations

import dataclasses

from core.factories import full_snapshot

from gpuwatch.cli.table import render_snapshot


def test_a_healthy_snapshot_has_no_health_line() -> None:
    text = render_snapshot(full_snapshot())
    assert "health" not in text


def test_a_recent_xid_and_a_pending_remap_are_named_under_the_gpu_table() -> None:
    snap = full_snapshot()
    sick = dataclasses.replace(snap.gpus[1].health, xid_count=2, xid_last=79, xid_last_time=snap.time - 30,
                               xid_recent=79, row_remap_pending=True)
    gpus = (snap.gpus[0], dataclasses.replace(snap.gpus[1], health=sick))
    lines = render_snapshot(dataclasses.replace(snap, gpus=gpus)).splitlines()
    assert [line for line in lines if "health" in line] == [
        "GPU 1 health: XID 79 (GPU fallen off the bus) 30 s ago · row remap pending (reset the GPU)"]
