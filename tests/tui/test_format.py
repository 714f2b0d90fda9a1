"""Numbers as the dashboard prints them: short, unit-bearing, a dash when unknown."""

from __future__ import annotations

import pytest

from gpuwatch.tui.format import age, age_steps, bar, energy, gib, memory, pct, rate, size
from gpuwatch.tui.status import banner_text
from gpuwatch.tui.widgets.history_plot import bucket, draw, time_axis


@pytest.mark.parametrize(("value", "expected"), [
    (None, "–"), (0, "0B"), (1023, "1023B"), (750 * 2**20, "750M"), (1.5 * 2**30, "1.5G"),
    (112.3 * 2**30, "112G"), (2 * 2**40, "2.0T"),
])
def test_sizes_use_binary_units_with_at_most_three_digits(value: float | None, expected: str) -> None:
    assert size(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, "–"), (0, "0B/s"), (999, "999B/s"), (2.1e8, "210MB/s"), (1.2e9, "1.2GB/s"), (15.9e6, "15.9MB/s"),
])
def test_rates_use_decimal_units_as_links_are_quoted(value: float | None, expected: str) -> None:
    assert rate(value) == expected


@pytest.mark.parametrize(("seconds", "expected"), [
    (None, "–"), (-3, "0s"), (42, "42s"), (185, "3m05s"), (7800, "2h10m"),
])
def test_ages_are_compact(seconds: float | None, expected: str) -> None:
    assert age(seconds) == expected


@pytest.mark.parametrize(("seconds", "expected"), [
    (None, "–"), (-3, "0s"), (4.9, "0s"), (5, "5s"), (44, "40s"), (59, "55s"), (60, "1m00s"), (185, "3m00s"),
    (599, "9m50s"), (600, "10m00s"), (2579, "42m00s"), (7800, "2h10m"),
])
def test_an_alerts_age_moves_in_steps_that_grow_with_it(seconds: float | None, expected: str) -> None:
    assert age_steps(seconds) == expected


@pytest.mark.parametrize(("value", "expected"), [(None, "   –"), (0, "  0%"), (62.4, " 62%"), (100, "100%")])
def test_percentages_are_right_aligned_in_four_cells(value: float | None, expected: str) -> None:
    assert pct(value) == expected


@pytest.mark.parametrize(("fraction", "expected"), [
    (None, "··········"), (0.0, "··········"), (0.5, "█████·····"), (1.0, "██████████"), (1.7, "██████████"),
    (0.05, "▌·········"),
])
def test_bars_fill_eighths_of_a_cell_and_never_overflow(fraction: float | None, expected: str) -> None:
    assert bar(fraction, 10, "blue").plain == expected


def test_history_buckets_average_each_time_slice_and_leave_gaps_empty() -> None:
    points = [(0.0, 10.0), (1.0, 30.0), (5.0, None), (9.5, 80.0)]
    assert bucket(points, 0.0, 10.0, 5) == [20.0, None, None, None, 80.0]


def test_history_columns_stack_eighth_blocks_from_the_bottom() -> None:
    rows = [t.plain for t in draw([0.0, 50.0, 100.0, None], 2, "blue")]
    assert rows == ["  █ ",   # top row: only the 100 % column reaches it
                    " ██ "]   # bottom row: 50 % fills it exactly, 0 % and missing leave it blank


@pytest.mark.parametrize(("value", "expected"), [
    (None, "–"), (0, "0"), (617 * 2**20, "0.60"), (1.13 * 2**30, "1.1"),
    (36 * 2**30, "36"), (104.2 * 2**30, "104"), (2 * 2**40, "2048"),
])
def test_memory_is_in_gib_everywhere(value: float | None, expected: str) -> None:
    assert gib(value) == expected
    assert memory(value) == ("–" if value is None else f"{expected} GiB")


@pytest.mark.parametrize(("joules", "expected"), [
    (None, "–"), (0, "0.0 Wh"), (41_400, "11.5 Wh"), (3.6e6, "1.0 kWh"), (8.64e9, "2.4 MWh"),
])
def test_energy_always_carries_its_unit(joules: float | None, expected: str) -> None:
    assert energy(joules) == expected


def test_the_recording_banner_keeps_its_two_ends_at_any_width() -> None:
    description = "recording (no NVIDIA driver here): h200-incident.ndjson.gz from 11 s"
    full = banner_text(description)
    assert full == "RECORDING: h200-incident.ndjson.gz from 11 s (no NVIDIA driver here) — replayed, not live"
    for width in (78, 60, 40, 10):
        text = banner_text(description, width)
        assert text.startswith("RECORDING") and text.endswith("— replayed, not live")
        assert len(text) <= max(width, len("RECORDING — replayed, not live"))


@pytest.mark.parametrize("width", [12, 30, 74])
def test_the_time_axis_spans_the_plot_from_five_minutes_ago_to_now(width: int) -> None:
    axis = time_axis(width)
    assert len(axis) == width and axis.endswith("now")
    if width >= 20:
        assert axis.startswith("5 min ago")


def test_the_diagnosis_scrollbar_draws_no_chart_glyphs_where_textuals_would() -> None:
    """Beside the findings, Textual's eighth-cell thumb ends (▂, ▆) read as a piece of the history chart."""
    from textual.scrollbar import ScrollBarRender

    from gpuwatch.tui.widgets.diagnosis_pane import SolidScrollBar

    def glyphs(renderer: type[ScrollBarRender]) -> set[str]:
        drawn = set()
        for position in range(0, 28):
            bar = renderer.render_bar(size=10, virtual_size=37, window_size=10, position=position)
            for seg in bar.segments:
                drawn |= set(seg.text)
        return drawn - {" "}

    assert glyphs(ScrollBarRender)  # what the default draws at some positions
    assert glyphs(SolidScrollBar) == set()
