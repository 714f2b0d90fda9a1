"""nvitop's common keys work (Pilot): h help, Enter details, T/K/I one signal after a yes, ',' '.' sort
columns, ←/→ scroll a long command; and the view state is the app's, bound to the table that shows it."""

from __future__ import annotations

import dataclasses
import io
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import live_app, replay_app
from rich.console import Console
from test_kill import select_pid, wait_exit

from gpuwatch.model.recording import RecordingWriter, load, read_header
from gpuwatch.tui.widgets.help_screen import HelpScreen
from gpuwatch.tui.widgets.kill_dialog import KillDialog
from gpuwatch.tui.widgets.lines import TextLine
from gpuwatch.tui.widgets.process_screen import ProcessScreen, details
from gpuwatch.tui.widgets.process_table import ProcessTable, Sort

SIZE = (160, 50)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    # a Python process as a user's shell starts one: SIGINT at its default (a test runner's worker may ignore
    # it, and an ignored SIGINT is inherited), and running before it is signalled (a signal that lands
    # between fork and exec is lost with the parent's handler)
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(5)


async def test_h_opens_the_help_like_question_mark(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("h")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_enter_shows_the_selected_process_in_full_and_escape_closes_it(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(ProcessTable)
        await pilot.press("down", "enter")
        assert isinstance(app.screen, ProcessScreen) and app.screen.proc == table.selected()
        proc = app.screen.proc
        console = Console(width=96, file=io.StringIO(), record=True)
        console.print(details(proc))
        text = console.export_text()
        assert "python3 serve.py --worker 1 --gpu 0" in text
        # grouped, in words, each figure with its unit
        assert [g for g in ("process", "on the GPU", "on the CPU", "memory and I/O") if f"\n{g}" in text] == [
            "process", "on the GPU", "on the CPU", "memory and I/O"], text
        rows = {line.strip().split("  ", 1)[0]: line.strip().split("  ", 1)[-1].strip() for line in text.splitlines()}
        assert rows["pid, parent"] == f"{proc.pid}, parent {proc.ppid}"
        assert rows["resident host memory"] == "7.0 GiB" and rows["started"].endswith("UTC")
        assert rows["busiest thread"] == f"{proc.top_thread_cpu_percent:.0f}%"  # no thread id in this recording
        await pilot.press("escape")
        assert not isinstance(app.screen, ProcessScreen)


@pytest.mark.parametrize(("key", "expected"), [("T", signal.SIGTERM), ("K", signal.SIGKILL), ("I", signal.SIGINT)])
async def test_capital_keys_send_one_signal_after_yes(child: subprocess.Popen[bytes], key: str, expected: int) -> None:
    app = live_app(extra_pids=(child.pid,))
    async with app.run_test(size=SIZE) as pilot:
        await select_pid(pilot, app, child.pid)
        await pilot.press(key)
        assert isinstance(app.screen, KillDialog) and [int(s) for s in app.screen.offer] == [expected]
        await pilot.press("y")
        assert wait_exit(child, 15.0) == -expected  # Python re-raises an unhandled SIGINT after its KeyboardInterrupt


@pytest.mark.parametrize("answer", ["n", "escape", "enter"])
async def test_capital_keys_send_nothing_without_yes(child: subprocess.Popen[bytes], answer: str) -> None:
    app = live_app(extra_pids=(child.pid,))
    async with app.run_test(size=SIZE) as pilot:
        await select_pid(pilot, app, child.pid)
        await pilot.press("K", answer)  # Enter presses the focused button: Cancel
        await pilot.pause()
        assert not isinstance(app.screen, KillDialog)
    assert wait_exit(child, 0.3) is None


async def test_signal_keys_in_a_recording_are_refused(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("T")
        assert not isinstance(app.screen, KillDialog)
        assert any("this is a recording" in str(n.message) for n in app._notifications)


async def test_comma_and_full_stop_step_the_sort_column(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(ProcessTable)
        keys = table.column_keys
        start = keys.index("gmem")
        await pilot.press("full_stop")
        assert table.sort.key == keys[start + 1]
        await pilot.press("comma", "comma")
        assert table.sort.key == keys[start - 1]
        await pilot.press("r")
        assert table.sort == Sort(keys[start - 1], reverse=not Sort().by(keys[start - 1]).reverse)


async def test_the_view_is_the_apps_state_bound_to_the_table_and_the_status_line(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        view = app.dashboard
        view.sort, view.tree_view, view.filter_text = Sort("cpu", reverse=False), True, "serve"
        await pilot.pause()
        table = app.query_one(ProcessTable)
        assert (table.sort, table.tree_view, table.filter_text) == (Sort("cpu", False), True, "serve")
        assert "sort cpu↑, tree, filter 'serve'" in app.query_one("#status", TextLine).plain
        assert table.labels["cpu"] == "CPU%▲"


def _long_commands(bundled: Path, out: Path) -> Path:
    """The bundled recording's first 140 s with its two processes started by long command lines that
    differ only at the end (two replicas of one launcher)."""
    header = read_header(bundled)
    with RecordingWriter(out, header) as w:
        for snap in load(bundled)[:140]:
            w.write(dataclasses.replace(snap, processes=tuple(
                dataclasses.replace(p, cmdline=f"/opt/venv/bin/python3 /srv/app/serve.py --model /models/llama "
                                               f"--max-batch 64 --replica {p.pid}") for p in snap.processes)))
    return out


async def test_left_and_right_scroll_a_long_command(bundled: Path, tmp_path: Path) -> None:
    app = replay_app(_long_commands(bundled, tmp_path / "long.ndjson.gz"), 130)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(ProcessTable)
        before = str(table.cells[table.keys[0]][-1])  # cut in the middle: the two replicas differ at the end
        whole = table.label(table.samples[table.keys[0]])
        await pilot.press("right", "right")
        after = str(table.cells[table.keys[0]][-1])
        assert table.cmd_offset == 16 and after == whole[16:] and table.labels["cmd"].endswith("◀+16")
        await pilot.press("left", "left", "left")
        assert table.cmd_offset == 0 and str(table.cells[table.keys[0]][-1]) == before
