"""What a tick writes to the terminal: only the cells that changed, each run from its first cell, with only
the colour codes that change, and rows that moved scrolled in place. Checked on the writer itself, on the
cell diff, on the plot's cadence, and in a real terminal (tmux): the screen built from partial updates is
the screen a full repaint draws, and scrolled rows land where the new frame has them."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from conftest import replay_app
from rich.color import ColorSystem
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate
from textual.strip import Strip
from tmux_pane import Tmux

from gpuwatch.tui.terminal_cells import TerminalCells, write_by_pen
from gpuwatch.tui.terminal_output import DEFAULT_PEN, Pen, SpanWriter, pen_of, render_spans, transition
from gpuwatch.tui.widgets.history_plot import HistoryPlot, complete_columns
from gpuwatch.tui.widgets.lines import Cell, cells, changed_runs

WHITE_ON_GREY = Style(color="#e0e0e0", bgcolor="#121212")
BOLD_WHITE_ON_GREY = Style(bold=True, color="#e0e0e0", bgcolor="#121212")
BLUE_ON_GREY = Style(color="#0078d4", bgcolor="#121212")


class _Console:
    _color_system = ColorSystem.TRUECOLOR


def test_a_span_in_the_middle_of_a_widget_is_written_from_its_own_first_cell() -> None:
    line = Strip([Segment("GPU-Util  ", BOLD_WHITE_ON_GREY), Segment("███▌", BLUE_ON_GREY),
                  Segment("   41%", WHITE_ON_GREY)])
    # one widget spanning columns 0-19 of screen row 3; the "41%" changed (columns 17-19)
    update = ChopsUpdate([{}, {}, {}, {0: line}], [(3, 17, 20)], [[], [], [], [20]])
    out = render_spans(update, _Console())  # type: ignore[arg-type]
    assert out == "\x1b[4;18H\x1b[0;38;2;224;224;224;48;2;18;18;18m41%\x1b[0m"
    assert "GPU-Util" not in out  # Textual's own writer resends the line from the widget's left edge


def test_colour_codes_are_stated_only_where_the_style_changes() -> None:
    writer = SpanWriter(ColorSystem.TRUECOLOR)
    writer.move_to(0, 0)
    writer.write([Segment("██", BLUE_ON_GREY), Segment("▌", BLUE_ON_GREY), Segment(" 5%", WHITE_ON_GREY)])
    writer.move_to(40, 0)
    writer.write([Segment("7%", WHITE_ON_GREY)])  # same colours as the last cell written: no code at all
    out = writer.finish()
    assert out == ("\x1b[1;1H\x1b[0;38;2;0;120;212;48;2;18;18;18m██▌\x1b[38;2;224;224;224m 5%"
                   "\x1b[41G7%\x1b[0m")  # same row: the column alone


def test_an_attribute_that_goes_off_is_turned_off_by_its_own_code() -> None:
    bold, plain = pen_of(BOLD_WHITE_ON_GREY, ColorSystem.TRUECOLOR), pen_of(WHITE_ON_GREY, ColorSystem.TRUECOLOR)
    assert transition(plain, bold) == "\x1b[1m"
    assert transition(bold, plain) == "\x1b[22m"  # not a reset and the whole style again
    bold_dim = pen_of(Style(bold=True, dim=True, color="#e0e0e0", bgcolor="#121212"), ColorSystem.TRUECOLOR)
    dim_blue = pen_of(Style(dim=True, color="#0078d4", bgcolor="#121212"), ColorSystem.TRUECOLOR)
    assert transition(bold_dim, dim_blue) == "\x1b[22;2;38;2;0;120;212m"  # 22 ends dim too: dim again
    overline = pen_of(Style(overline=True, color="#e0e0e0", bgcolor="#121212"), ColorSystem.TRUECOLOR)
    assert transition(overline, plain) == "\x1b[0;38;2;224;224;224;48;2;18;18;18m"  # no off code: reset
    assert transition(plain, DEFAULT_PEN) == "\x1b[39;49m"
    assert transition(None, Pen(0, "", "")) == "\x1b[0m" and transition(plain, plain) == ""


def _cells(*segments: tuple[str, Style]) -> list[Cell]:
    return cells(Strip([Segment(text, style) for text, style in segments]))


def test_changed_cells_form_runs_and_runs_a_few_cells_apart_are_written_as_one() -> None:
    old = _cells(("CPU 6% · load 0.6 · RAM 1.6G", WHITE_ON_GREY))
    new = _cells(("CPU 7% · load 0.6 · RAM 1.7G", WHITE_ON_GREY))
    assert changed_runs(old, new, gap=6) == [(4, 5), (26, 27)]
    assert changed_runs(old, new, gap=30) == [(4, 27)]
    assert changed_runs(old, _cells(("CPU 6% · load 0.6 · RAM 1.6G", BLUE_ON_GREY))) == [(0, 28)]  # colour only
    assert changed_runs(old, old) == []


def test_a_wide_character_takes_two_cells_so_later_runs_keep_their_columns() -> None:
    old, new = _cells(("名 a", WHITE_ON_GREY)), _cells(("名 b", WHITE_ON_GREY))
    assert len(old) == 4 and changed_runs(old, new) == [(3, 4)]


def test_plot_columns_are_fixed_slices_of_time_and_only_complete_ones_are_drawn() -> None:
    start, end, index = complete_columns(1000.0, 100)  # 3 s per column
    assert (start, end, index) == (699.0, 999.0, 332)
    assert complete_columns(1001.9, 100) == (start, end, index)  # same columns until 1002 s
    assert complete_columns(1002.0, 100)[2] == index + 1


async def test_between_column_ends_a_tick_leaves_the_plot_alone(bundled: Path) -> None:
    app = replay_app(bundled, 130)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        plot = app.query_one(HistoryPlot)
        feed = app.feed
        redraws, before = plot.redraws, plot.plain
        span = 300.0 / (plot.size.width - 6)  # seconds per column; the recording has a sample a second
        assert span >= 3
        for _ in range(int(span) - 1):  # fewer ticks than a column lasts: at most one column ends
            feed.sampler.tick()  # type: ignore[attr-defined]
            app.dashboard._render_selected()
            await pilot.pause()
        assert plot.redraws - redraws <= 1
        if plot.redraws == redraws:
            assert plot.plain == before
        for _ in range(int(span) + 1):  # a whole column's time: one ends, and the plot moves on
            feed.sampler.tick()  # type: ignore[attr-defined]
            app.dashboard._render_selected()
            await pilot.pause()
        assert plot.redraws > redraws and plot.plain != before


def _above_diagnosis(screen: str) -> list[str]:
    lines = screen.splitlines()
    return lines[:next(i for i, line in enumerate(lines) if "Diagnosis" in line)]


def _settled(tmux: Tmux, timeout: float = 20.0) -> str:
    """The pane (with colours) once two captures 2 s apart agree: the last frame, and a diagnosis the
    doctor thread was still working on when the dashboard paused, have landed."""
    deadline = time.monotonic() + timeout
    before = tmux("capture-pane", "-p", "-e", "-t", "gw")
    while time.monotonic() < deadline:
        time.sleep(2.0)
        now = tmux("capture-pane", "-p", "-e", "-t", "gw")
        if now == before:
            return now
        before = now
    raise AssertionError(f"the paused screen kept changing for {timeout} s:\n{before}")


def test_a_screen_built_from_partial_updates_is_the_screen_a_full_repaint_draws(tmux: Tmux, bundled: Path) -> None:
    tmux.start(f"{sys.executable} -m gpuwatch tui --replay {bundled} --speed 10")
    tmux.wait_screen("GPU-Util", " 558 ", "Diagnosis ·")
    time.sleep(8)  # ~80 recorded seconds of partial updates: numbers, bars, ages, plot columns, findings
    tmux("send-keys", "-t", "gw", "p")
    tmux.wait_screen("PAUSED")
    partial = _settled(tmux)
    # Ctrl-L: every widget renders afresh and the frame is written whole. (Not a resize: the rows the panes
    # hold depend on how the findings grew and shrank, and a new size shares them afresh.)
    tmux("send-keys", "-t", "gw", "C-l")
    full = _settled(tmux)
    assert "GPU-Util" in full and "PAUSED" in full
    differ = [f"row {y}:\n  partial {a!r}\n  full    {b!r}"
              for y, (a, b) in enumerate(zip(partial.splitlines(), full.splitlines(), strict=False)) if a != b]
    assert partial.splitlines() == full.splitlines(), "\n".join(differ)
    tmux("send-keys", "-t", "gw", "q")
    assert tmux.wait_exit() == 0


def _frame(cells: TerminalCells, lines: list[str]) -> str:
    """What :class:`TerminalCells` writes to show ``lines`` (each a full row of the 40x12 screen)."""
    writer = SpanWriter(ColorSystem.TRUECOLOR)
    cells.update(writer, [(0, y, [Segment(line.ljust(40)[:8], BOLD_WHITE_ON_GREY),
                                  Segment(line.ljust(40)[8:], BLUE_ON_GREY)]) for y, line in enumerate(lines)])
    return writer.finish()


@pytest.mark.parametrize("move", ["up 3", "down 1"])
def test_rows_that_moved_are_scrolled_in_place_and_a_real_terminal_shows_the_new_frame(
        tmux: Tmux, tmp_path: Path, move: str) -> None:
    rows = [f"row {i:02d}  " + "".join(chr(65 + (i * 7 + j) % 26) for j in range(28)) for i in range(12)]
    moved = [*rows[:2], *rows[5:], "three", "new", "rows"] if move == "up 3" else ["a new first row", *rows[:-1]]
    cells = TerminalCells()
    cells.forget(40, 12)
    first = _frame(cells, rows)
    second = _frame(cells, moved)
    assert ("\x1b[3;12r\x1b[3S" if move == "up 3" else "\x1b[1;12r\x1b[1T") in second  # one scroll moved them
    assert len(second) < len(first) / 3
    stream = tmp_path / "frames"
    stream.write_text(first + second)
    tmux.start(f"sh -c 'cat {stream}; sleep 60'", size=(40, 12))
    shown = tmux.wait_screen(moved[-1].strip())
    assert [line.rstrip() for line in shown.splitlines()[:12]] == [line.rstrip() for line in moved]


def test_an_update_leaves_its_colours_to_the_next_and_giving_the_terminal_back_makes_it_plain(
        tmux: Tmux, tmp_path: Path) -> None:
    cells = TerminalCells()
    cells.forget(40, 12)
    cells.carry(True)

    def update(x: int, text: str, style: Style) -> str:
        writer = cells.writer(ColorSystem.TRUECOLOR)
        cells.update(writer, [(x, 0, [Segment(text, style)])])
        return cells.finish(writer)

    first = update(0, "GPU-Util 12%", BLUE_ON_GREY)
    assert first.startswith("\x1b[1;1H\x1b[0;38;2;0;120;212;48;2;18;18;18m") and not first.endswith("\x1b[0m")
    assert update(9, "34", BLUE_ON_GREY) == "\x1b[1;10H34"  # the same colours as the last cell written: none
    assert update(14, "W", WHITE_ON_GREY) == "\x1b[1;15H\x1b[38;2;224;224;224mW"  # only the colour that changed
    back = cells.carry(False)
    assert back == "\x1b[0m"
    assert update(16, "x", BLUE_ON_GREY).endswith("x\x1b[0m")  # not carried: each update ends plain again
    stream = tmp_path / "frames"
    stream.write_text(first + "\x1b[1;10H34" + "\x1b[1;15H\x1b[38;2;224;224;224mW" + back + "\r\n\nthe shell again")
    tmux.start(f"sh -c 'cat {stream}; sleep 60'", size=(40, 12))
    tmux.wait_screen("the shell again")
    first_row = tmux("capture-pane", "-p", "-e", "-S", "0", "-E", "0", "-t", "gw")
    assert "GPU-Util 34%" in first_row and "38;2;0;120;212" in first_row, first_row
    # the shell's text in the default colours (a row captured alone starts from them): the reset came before it
    assert tmux("capture-pane", "-p", "-e", "-S", "2", "-E", "2", "-t", "gw").rstrip() == "the shell again"


def test_runs_are_written_so_that_each_colour_is_stated_about_once() -> None:
    # a tick: on two rows a bar's tip (blue) and its figure (white) changed, as on the GPU panel
    blue, white = pen_of(BLUE_ON_GREY, ColorSystem.TRUECOLOR), pen_of(WHITE_ON_GREY, ColorSystem.TRUECOLOR)
    runs = [(14, 3, [("▊", blue)]), (36, 3, [("2", white), ("9", white)]),
            (14, 6, [("▍", blue)]), (36, 6, [("4", white)])]
    writer = SpanWriter(ColorSystem.TRUECOLOR)
    write_by_pen(writer, runs)
    out = writer.finish()
    assert out.count("38;2;0;120;212") == 1 and out.count("38;2;224;224;224") == 1
    moves_and_text = re.sub(r"\x1b\[[0-9;]*m", "", out)  # each run still lands at its own place
    assert moves_and_text == "\x1b[4;15H▊\x1b[7;15H▍\x1b[4;37H29\x1b[7;37H4"


def test_ctrl_l_redraws_what_another_program_wrote_over_the_dashboard(tmux: Tmux, bundled: Path) -> None:
    tmux.start(f"{sys.executable} -m gpuwatch tui --replay {bundled} --speed 10")
    tmux.wait_screen("GPU-Util", " 558 ", "Diagnosis ·")
    tmux("send-keys", "-t", "gw", "p")  # paused: nothing changes by itself any more
    tmux.wait_screen("PAUSED")
    clean = _settled(tmux)
    with open(tmux.pane("#{pane_tty}"), "w") as tty:  # what `wall` does to a terminal
        tty.write("\x1b[20;10HBROADCAST FROM ANOTHER PROGRAM")
    tmux.wait_screen("BROADCAST FROM ANOTHER PROGRAM")
    time.sleep(1.5)
    assert "BROADCAST" in tmux.screen()  # only changed cells are written: the stray text stays...
    tmux("send-keys", "-t", "gw", "C-l")
    redrawn = _settled(tmux)
    assert "BROADCAST" not in redrawn  # ...until ctrl+l redraws the whole screen, every pane above the diagnosis
    # as it was (the diagnosis of the paused moment may still be judged again when the screen is redrawn)
    assert _above_diagnosis(redrawn) == _above_diagnosis(clean)
    tmux("send-keys", "-t", "gw", "q")
    assert tmux.wait_exit() == 0
