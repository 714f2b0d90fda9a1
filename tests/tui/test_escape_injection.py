"""The dashboard over a host whose process names, command lines, users and hostname hold terminal escape
sequences (screen clear, OSC 52 clipboard write, CSI query, 8-bit CSI, bidi override): what it sends to
the terminal carries none of them raw, and the process table and the process screen show them written
out (``\\x1b``)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from conftest import replay_app
from hostile_text import CMDLINE, NAME, raw_in, write_hostile_recording
from rich.console import Console

from gpuwatch.model.visible import visible
from gpuwatch.tui.widgets.process_screen import ProcessScreen, details
from gpuwatch.tui.widgets.process_table import ProcessTable

SIZE = (160, 50)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_hostile_recording(tmp_path_factory.mktemp("hostile") / "hostile.ndjson.gz", seconds=200)


def _screen_text(app: object) -> tuple[str, str]:
    """(the characters on screen, the bytes Textual would write for a full redraw) of the current screen."""
    compositor = app.screen._compositor  # type: ignore[attr-defined]
    strips = compositor.render_strips()
    text = "\n".join("".join(seg.text for seg in strip) for strip in strips)
    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor")
    written = compositor.render_full_update().render_segments(console)
    return text, written


async def test_the_dashboard_shows_hostile_process_text_written_out_and_sends_none_of_it(hostile: Path) -> None:
    app = replay_app(hostile, 150)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(ProcessTable)
        assert table.keys, "the recording's process is listed"
        proc = table.samples[table.keys[0]]
        assert proc.name == visible(NAME) and proc.cmdline == visible(CMDLINE)
        text, written = _screen_text(app)
        assert raw_in(text) == []
        assert "\x1b]52" not in written and "\x1b[2J" not in written and "\x1b[6n" not in written
        assert "\x07" not in written and "\x9b" not in written and "\u202e" not in written
        assert "\\x1b" in text  # the process's command shows, its escapes written out

        await pilot.press("enter")
        assert isinstance(app.screen, ProcessScreen)
        out = Console(width=200, file=io.StringIO(), record=True)
        out.print(details(app.screen.proc))
        assert visible(CMDLINE) in out.export_text() and raw_in(out.export_text()) == []
        text, written = _screen_text(app)
        assert raw_in(text) == [] and "\x1b]52" not in written and "\x1b[2J" not in written
