"""The GPU panel's health line: absent while all is well, under the title naming what is wrong when not
(an XID with its meaning and age, a row remap waiting), gone again once the XID is ten minutes old."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from conftest import replay_app
from synthetic import T0, snapshot

from gpuwatch.model.health import GpuHealth
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.tui.widgets.gpu_panel import LINES, GpuPanel, render_gpu

SIZE = (160, 50)
HEALTHY = GpuHealth(xid_count=0, xid_recent=0, remapped_rows_correctable=0, remapped_rows_uncorrectable=0,
                    row_remap_pending=False, row_remap_failure=False, pcie_replays=0, memory_temperature_c=45.0,
                    nvlink_links=18, nvlink_links_up=18)


def recording(path: Path, health_at: dict[int, GpuHealth | None], seconds: int = 200) -> Path:
    """The synthetic trace with GPU 0's health from tick ``t`` on set to ``health_at[t]``."""
    header = RecordingHeader(created=T0, interval_s=1.0, hostname="h200-node-1", description="health line")
    health: GpuHealth | None = None
    with RecordingWriter(path, header) as w:
        for tick in range(seconds):
            health = health_at.get(tick, health)
            snap = snapshot(tick)
            gpu0 = dataclasses.replace(snap.gpus[0], health=health)
            w.write(dataclasses.replace(snap, gpus=(gpu0, *snap.gpus[1:])))
    return path


async def panel_lines(path: Path, ticks: int) -> list[str]:
    app = replay_app(path, ticks)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        return [t.plain for t in app.query_one(GpuPanel)._texts]


async def test_a_healthy_gpu_shows_no_health_line_and_the_same_panel_as_one_without_health(tmp_path: Path) -> None:
    healthy = await panel_lines(recording(tmp_path / "healthy.ndjson", {0: HEALTHY}), 60)
    unknown = await panel_lines(recording(tmp_path / "unknown.ndjson", {}), 60)
    assert not any(line.startswith("health") for line in healthy)
    assert healthy == unknown


async def test_an_xid_shows_its_code_meaning_and_age_under_the_title(tmp_path: Path) -> None:
    xid = dataclasses.replace(HEALTHY, xid_count=1, xid_last=79, xid_last_time=T0 + 10, xid_recent=79)
    lines = await panel_lines(recording(tmp_path / "xid.ndjson", {0: HEALTHY, 10: xid}), 130)
    assert lines[1].startswith("health") and "XID 79 (GPU fallen off the bus) 2 min ago" in lines[1]
    assert lines[0].startswith("GPU 0")


async def test_a_pending_row_remap_is_named_and_the_line_goes_when_the_xid_is_ten_minutes_old(
        tmp_path: Path) -> None:
    xid = dataclasses.replace(HEALTHY, xid_count=1, xid_last=13, xid_last_time=T0 + 1, xid_recent=13)
    pending = dataclasses.replace(xid, row_remap_pending=True)
    path = recording(tmp_path / "remap.ndjson", {0: HEALTHY, 1: xid, 5: pending, 700: HEALTHY}, seconds=720)
    lines = await panel_lines(path, 30)  # the 30th snapshot: T0 + 29
    assert "XID 13 (graphics engine exception, usually an application bug) 28 s ago" in lines[1]
    assert "row remap pending (reset the GPU)" in lines[1]
    later = await panel_lines(path, 650)  # XID 13 is 648 s old: only the remap is left
    assert lines[1] != later[1] and later[1].split(None, 1)[1] == "row remap pending (reset the GPU)"
    healed = await panel_lines(path, 710)
    assert not any(line.startswith("health") for line in healed)


class Palette:
    primary = memory = accent = ok = warning = error = "white"


def test_in_the_smallest_panel_the_health_line_pushes_the_clock_line_out_not_the_numbers() -> None:
    gpu, pal = snapshot(0).gpus[0], Palette()
    plain = render_gpu(gpu, 120, pal, height=LINES).plain.split("\n")  # type: ignore[arg-type]
    sick = render_gpu(gpu, 120, pal, height=LINES, problems=("row remap failed",)).plain.split("\n")  # type: ignore[arg-type]
    assert len(plain) == LINES and plain[-1].startswith("clocks")
    assert sick[1] == "health    row remap failed" and sick[2:LINES] == plain[1:LINES - 1]
