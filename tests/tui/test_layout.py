"""Space goes to what has content: the process table takes its rows, the alerts pane its alerts, the
diagnosis the rest (stacked under the alerts where everything fits at full width). Checked as a table of
plans and on the real screen at 80x24, 120x40, 160x50 and 200x60."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import replay_app

from gpuwatch.model.finding import Finding
from gpuwatch.model.recording import load
from gpuwatch.tui.layout import SHRINK_AFTER_S, TOP_GROW, Plan, plan, settle
from gpuwatch.tui.widgets.alerts_pane import AlertsPane
from gpuwatch.tui.widgets.diagnosis_pane import DiagnosisPane, FindingsText
from gpuwatch.tui.widgets.gpu_panel import GpuPanel
from gpuwatch.tui.widgets.history_plot import HistoryPlot
from gpuwatch.tui.widgets.process_table import ProcessTable

SIZES = [(80, 24), (120, 40), (160, 50), (200, 60)]


def lines(n: int):  # type: ignore[no-untyped-def]
    return lambda width: n


@pytest.mark.parametrize(("rows", "width", "procs", "alerts", "diag", "plot", "expected"), [
    # everything fits at full width: stacked, the spare rows to the GPU panel first, the rest to the diagnosis
    (30, 120, 2, 3, 12, False, Plan(procs=3, alerts=6, diagnosis=21 - TOP_GROW, stacked=True, top_extra=TOP_GROW)),
    # with the plot on screen it takes half the spare rows
    (38, 160, 2, 3, 9, True, Plan(procs=3, alerts=6, diagnosis=20, stacked=True, top_extra=9)),
    # 80x24: side by side, the table keeps its two rows, the panes get the rest (3 alerts fit)
    (14, 80, 2, 3, 12, False, Plan(procs=3, alerts=11, diagnosis=11, stacked=False)),
    # a long process list keeps a third of the rows, the panes get what they need
    (30, 120, 40, 2, 4, False, Plan(procs=24, alerts=6, diagnosis=6, stacked=False)),
    # a long list and a long diagnosis: the table keeps a third, the panes the rest
    (30, 120, 40, 2, 30, False, Plan(procs=10, alerts=20, diagnosis=20, stacked=False)),
    # no room at all: the table keeps its header and a row, the panes what is left
    (5, 80, 10, 5, 10, False, Plan(procs=3, alerts=2, diagnosis=2, stacked=False)),
])
def test_plan(rows: int, width: int, procs: int, alerts: int, diag: int, plot: bool, expected: Plan) -> None:
    assert plan(rows, width, procs, alerts, lines(diag), plot_shown=plot) == expected


def test_findings_too_long_for_the_screen_stay_stacked_where_that_shows_more_of_them() -> None:
    wrapped = lambda width: 22 if width >= 100 else 36  # noqa: E731 - lines at full and at half width
    assert plan(30, 120, 2, 3, wrapped) == Plan(procs=3, alerts=6, diagnosis=21, stacked=True)
    assert plan(14, 80, 2, 3, lambda width: 25 if width >= 80 else 40).stacked is False


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
async def test_every_alert_is_shown_and_the_table_has_no_empty_rows(bundled: Path, size: tuple[int, int]) -> None:
    app = replay_app(bundled, 130)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        table, alerts = app.query_one(ProcessTable), app.query_one(AlertsPane)
        diagnosis = app.query_one(DiagnosisPane)
        # ProcessThreadCpuBound and GpuMemoryHeldWhileIdle pending (the start-up allocation sets off no memory rule)
        assert alerts.row_count == 2 and alerts.size.height >= 1 + alerts.row_count
        assert table.size.height == 1 + table.row_count == 3
        if size[0] >= 120:  # stacked: alerts at full width, the diagnosis gets every row left
            shown = app.dashboard.layout_plan
            assert alerts.size.width > size[0] - 6 and shown is not None and shown.stacked
            # at 160x50 and larger the whole diagnosis is on screen; at 120x40 all but a few lines
            assert diagnosis.max_scroll_y == 0 if size[0] >= 160 else diagnosis.size.height >= 19
        else:
            assert diagnosis.size.height >= 9  # was 2 lines before the layout followed content
        used = sum(w.outer_size.height for w in app.screen.children if w.display)
        assert used == size[1], [(w.id, w.outer_size.height) for w in app.screen.children if w.display]


@pytest.mark.parametrize("size", SIZES[1:], ids=[f"{w}x{h}" for w, h in SIZES[1:]])
async def test_the_panel_and_the_plot_legend_are_not_cut(bundled: Path, size: tuple[int, int]) -> None:
    app = replay_app(bundled, 130)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        panel, plot = app.query_one(GpuPanel).plain, app.query_one(HistoryPlot)
        assert "tx 2.7MB/s" in panel and "00000000:00:06.0" in panel
        legend = plot.plain.splitlines()[0]
        # the mean memory of the 130 snapshots shown (the first ~11 s idle at 0.5 %, then 75 %)
        shown = load(bundled)[:130]
        mems = [s.gpus[0].mem_used_ratio * 100 for s in shown]  # type: ignore[operator]
        assert len(legend.rstrip()) <= plot.size.width and legend.rstrip().endswith(f"{sum(mems) / len(mems):.0f}%")
        # and it says over which samples: since the first (to the minute in the shortest wording)
        since = time.strftime("%H:%M:%S", time.gmtime(shown[0].time))
        assert f"since {since}: " in legend or (size[0] < 160 and f"since {since[:5]} " in legend), legend


def test_findings_that_need_more_rows_get_them_at_once_and_give_them_back_only_once_that_lasts() -> None:
    """A layout change repaints the whole terminal: findings that come and go every few seconds must not
    move the panes every time (on the H200, four ~30 KB repaints a minute)."""
    small = plan(36, 160, 4, 1, lambda w: 6, plot_shown=True)
    large = plan(36, 160, 4, 1, lambda w: 20, plot_shown=True)
    assert large.diagnosis > small.diagnosis
    assert settle(small, large, None, 0.0) == (large, None)  # more findings: shown now
    kept, since = settle(large, small, None, 100.0)
    assert (kept, since) == (large, 100.0)  # fewer: the pane keeps its rows for now
    assert settle(large, small, since, 100.0 + SHRINK_AFTER_S - 1) == (large, 100.0)
    assert settle(large, small, since, 100.0 + SHRINK_AFTER_S) == (small, None)  # it lasted: given back
    moved = plan(36, 160, 9, 1, lambda w: 6, plot_shown=True)  # a process more: everything moves anyway
    assert settle(large, moved, since, 101.0) == (moved, None)


def test_findings_that_grow_but_still_fit_their_pane_move_nothing() -> None:
    """The GPU panel takes the spare rows, so every new line of findings would shrink it and move every pane
    (a whole-terminal repaint) even when the diagnosis pane had blank rows for it."""
    small = plan(36, 160, 4, 1, lambda w: 6, plot_shown=True)
    grown = plan(36, 160, 4, 1, lambda w: 12, plot_shown=True)
    assert grown.diagnosis > small.diagnosis and grown.diagnosis_need <= small.diagnosis
    assert settle(small, grown, None, 0.0) == (small, None)
    too_long = plan(36, 160, 4, 1, lambda w: 20, plot_shown=True)
    assert too_long.diagnosis_need > small.diagnosis
    assert settle(small, too_long, None, 0.0) == (too_long, None)


async def test_a_finding_that_gains_or_loses_a_line_within_its_pane_moves_nothing(bundled: Path) -> None:
    """A new height lays the screen out (twice) and repaints the pane: evidence that gains or loses a line
    while the findings fit the pane changes only those lines; past the pane, every line can be scrolled
    to, and no further than the last."""
    def finding(lines: int) -> list[Finding]:
        return [Finding("Probe", "A probe finding", "warning", 10.0, 0, None,
                        tuple(f"evidence {i}" for i in range(lines)), "fix it")]

    app = replay_app(bundled, 130)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        pane, text = app.query_one(DiagnosisPane), app.query_one(FindingsText)
        pane.show(finding(4))
        await pilot.pause()
        regions = [w.region for w in (text, pane, app.query_one(GpuPanel), app.query_one(AlertsPane))]
        for lines in (3, 5, 2):
            pane.show(finding(lines))
            await pilot.pause()
            assert f"evidence {lines - 1}" in text.plain and f"evidence {lines}" not in text.plain
            assert [w.region for w in (text, pane, app.query_one(GpuPanel), app.query_one(AlertsPane))] == regions
            assert pane.max_scroll_y == 0
        pane.show(finding(80))
        await pilot.pause()
        assert pane.max_scroll_y == 1 + 80 + 1 - pane.scrollable_content_region.height  # title, evidence, fix
        pane.show(finding(2))
        await pilot.pause()
        assert pane.max_scroll_y == 0
