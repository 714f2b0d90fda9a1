"""Keys and mouse behave like htop/nvitop: sort, filter, tree, GPU pick, pause, help (Pilot tests)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import SyntheticLive, live_app, replay_app

from gpuwatch.sampler.sampler import Sampler
from gpuwatch.tui.app import make_app
from gpuwatch.tui.feed import LocalFeed
from gpuwatch.tui.widgets.help_screen import HelpScreen
from gpuwatch.tui.widgets.lines import TextLine
from gpuwatch.tui.widgets.process_table import ProcessTable, Sort

SIZE = (160, 50)


def pids_in_order(table: ProcessTable) -> list[int]:
    return [table.samples[k].pid for k in table.keys]


def header_x(table: ProcessTable, key: str) -> int:
    """The x offset of column ``key``'s header (each cell is its width plus one space each side)."""
    x = 0
    for c in table.columns_shown:
        if c.key == key:
            return x + 2
        x += c.width + 2
    raise KeyError(key)


def column_values(table: ProcessTable, key: str) -> list[float]:
    spec = next(c for c in table.columns_shown if c.key == key)
    return [spec.sort_value(table.samples[k]) for k in table.keys]


async def test_opens_sorted_by_gpu_memory_largest_first(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(ProcessTable)
        assert table.sort == app.dashboard.sort == Sort("gmem", reverse=True)
        values = column_values(table, "gmem")
        assert values == sorted(values, reverse=True) and len(values) == 3


@pytest.mark.parametrize(("presses", "expected_key"), [(1, "user"), (2, "gpu"), (3, "gmem"), (4, "sm"), (5, "cpu")])
async def test_s_cycles_the_sort_column_from_the_current_one(recording: Path, presses: int, expected_key: str) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(ProcessTable)
        app.dashboard.sort = Sort("pid", reverse=False)
        for _ in range(presses):
            await pilot.press("s")
        assert table.sort.key == expected_key
        values = column_values(table, expected_key)
        assert values == sorted(values, reverse=table.sort.reverse)


async def test_clicking_a_header_sorts_by_it_and_clicking_again_reverses(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(ProcessTable)
        await pilot.click("#procs", offset=(header_x(table, "cpu"), 0))
        await pilot.pause()
        assert table.sort == Sort("cpu", reverse=True)
        assert column_values(table, "cpu") == sorted(column_values(table, "cpu"), reverse=True)
        await pilot.click("#procs", offset=(header_x(table, "cpu"), 0))
        await pilot.pause()
        assert table.sort == Sort("cpu", reverse=False)
        assert column_values(table, "cpu") == sorted(column_values(table, "cpu"))


@pytest.mark.parametrize(("typed", "expected_pids"), [
    ("alice", [4102]),
    ("worker 1", [4101]),
    ("4100", [4100]),
    ("SERVE", [4100, 4101, 4102]),
    ("nothing-matches", []),
])
async def test_slash_filters_processes_by_user_command_or_pid(recording: Path, typed: str,
                                                              expected_pids: list[int]) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *list(typed), "enter")
        table = app.query_one(ProcessTable)
        assert sorted(pids_in_order(table)) == expected_pids
        assert table.has_focus


async def test_escape_clears_the_filter_and_shows_every_process_again(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *list("alice"))
        assert pids_in_order(app.query_one(ProcessTable)) == [4102]
        await pilot.press("escape")
        assert sorted(pids_in_order(app.query_one(ProcessTable))) == [4100, 4101, 4102]


async def test_t_shows_children_under_their_parent_and_t_again_returns_to_the_flat_list(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(ProcessTable)
        await pilot.press("t")
        commands = [str(table.cells[k][-1]) for k in table.keys]
        assert pids_in_order(table)[0] == 4100  # the parent first
        assert commands[0].startswith("[4000] serve.py --worker 0")
        assert [c[:3] for c in commands[1:]] == ["├─ ", "└─ "]
        await pilot.press("t")
        assert not any(str(table.cells[k][-1]).startswith(("├", "└")) for k in table.keys)


@pytest.mark.parametrize(("key", "expected_gpu", "expected_filter", "expected_pids"), [
    ("1", 0, 0, [4100, 4101, 4102]),
    ("2", 1, 1, [4110, 4111, 4112]),
])
async def test_number_keys_pick_a_gpu_and_show_only_its_processes(recording_2gpu: Path, key: str, expected_gpu: int,
                                                                  expected_filter: int,
                                                                  expected_pids: list[int]) -> None:
    app = replay_app(recording_2gpu, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        assert app.dashboard.selected_gpu == expected_gpu
        table = app.query_one(ProcessTable)
        assert table.gpu_filter == expected_filter
        assert sorted(pids_in_order(table)) == expected_pids
        assert app.query_one("#gpu").gpu.index == expected_gpu  # type: ignore[attr-defined]
        await pilot.press("0")
        assert table.gpu_filter is None and table.row_count == 6


async def test_a_gpu_that_does_not_exist_is_refused_with_a_message(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("9")
        assert app.dashboard.selected_gpu == 0
        assert any("no GPU 8" in str(n.message) for n in app._notifications)


async def test_p_pauses_sampling_and_says_so_and_p_again_resumes() -> None:
    app = live_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        assert app.dashboard.paused and app.feed.sampler.paused  # type: ignore[attr-defined]
        assert "PAUSED" in app.query_one("#status", TextLine).plain
        await pilot.press("p")
        assert not app.dashboard.paused and not app.feed.sampler.paused  # type: ignore[attr-defined]
        assert "PAUSED" not in app.query_one("#status", TextLine).plain


async def test_question_mark_opens_help_and_escape_closes_it(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_q_quits(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_a_new_theme_recolours_the_gpu_panel_and_the_tables(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        app.theme = "textual-light"
        await pilot.pause()
        primary = app.current_theme.primary
        panel = app.query_one("#gpu")
        assert any(primary in str(span.style) for span in panel._texts[0].spans)  # type: ignore[attr-defined]
        table = app.query_one(ProcessTable)
        cursor_row = table._row(table.cursor_key() or "", True)
        assert primary in str(cursor_row.spans[-1].style)


async def test_quitting_does_not_wait_on_a_source_whose_close_hangs() -> None:
    release = threading.Event()

    class HangsOnClose(SyntheticLive):
        def close(self) -> None:
            release.wait(30)  # a driver call that never returns

    feed = LocalFeed(Sampler(HangsOnClose(), interval=1.0), "live via NVML", False, run_sampler=False)
    feed.prime(2)
    app = make_app(feed)
    try:
        async with app.run_test(size=SIZE) as pilot:
            started = time.monotonic()
            await pilot.press("q")
        assert time.monotonic() - started < 5
    finally:
        release.set()


async def test_long_process_lists_scroll_with_the_cursor() -> None:
    app = live_app(extra_pids=tuple(range(50000, 50060)))
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(ProcessTable)
        assert table.row_count == 63
        await pilot.press("end")
        assert table.cursor == 62 and table.top + table.size.height - 1 > 62 >= table.top
        await pilot.press("home", "pagedown")
        assert table.cursor == table.size.height - 1  # one page: the rows below the header
        await pilot.click("#procs", offset=(3, 2))
        assert table.cursor == table.top + 1
