"""SVG snapshots of the dashboard at 80x24, 120x40, 160x50 and 200x60, from the bundled H200 recording at
fixed times.

The screen depends only on the recording and the tick count: times shown are the snapshots' own (UTC)
and alert ages are measured against them. After an intended change of the look, review the new SVGs
and accept them with ``pytest tests/tui/test_screens.py --snapshot-update``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import replay_app

SMALL, MEDIUM, LARGE, HUGE = (80, 24), (120, 40), (160, 50), (200, 60)


@pytest.mark.parametrize("size", [SMALL, MEDIUM, LARGE, HUGE], ids=["80x24", "120x40", "160x50", "200x60"])
@pytest.mark.parametrize("ticks", [130, 400], ids=["naive-serving", "bf16-power-capped"])
def test_overview(snap_compare: Callable[..., bool], bundled: Path, size: tuple[int, int], ticks: int) -> None:
    """The incident (GPU-Util ~30 %, occupancy ~2 %, one thread at 100 %) and the fixed service."""
    assert snap_compare(replay_app(bundled, ticks), terminal_size=size)


def test_help_screen(snap_compare: Callable[..., bool], bundled: Path) -> None:
    assert snap_compare(replay_app(bundled, 130), terminal_size=SMALL, press=["question_mark"])


def test_filtered_tree_sorted_by_cpu(snap_compare: Callable[..., bool], recording: Path) -> None:
    async def setup(pilot: Any) -> None:
        await pilot.press("slash", *list("serve"), "enter", "t")
        for _ in range(2):
            await pilot.press("s")

    assert snap_compare(replay_app(recording, 45), terminal_size=LARGE, run_before=setup)


def test_two_gpus_with_the_second_picked(snap_compare: Callable[..., bool], recording_2gpu: Path) -> None:
    assert snap_compare(replay_app(recording_2gpu, 48), terminal_size=LARGE, press=["2"])


def test_paused_four_minutes_back_in_the_incident(snap_compare: Callable[..., bool], bundled: Path) -> None:
    """After the fixes (400 s in), back to the naive serving: its numbers, its process rows, and the doctor's
    verdict on the window ending then, with the PAUSED marker on the status line."""
    assert snap_compare(replay_app(bundled, 400), terminal_size=LARGE, press=["less_than_sign"] * 4)
