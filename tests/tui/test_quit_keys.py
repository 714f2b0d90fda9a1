"""htop's and nvitop's habits: F1 opens the help, F10 quits, and Ctrl-C quits cleanly from anywhere
(the dashboard, the filter box, a dialog): exit status 0, the terminal given back, no traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import replay_app
from tmux_pane import Tmux

from gpuwatch.tui.widgets.help_screen import HelpScreen

SIZE = (160, 50)


async def test_f1_opens_the_help_and_escape_closes_it(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert app.screen is app.dashboard


@pytest.mark.parametrize(("before", "quit_key"), [
    ((), "f10"),
    ((), "ctrl+c"),
    (("slash", "5", "5"), "ctrl+c"),  # typing in the filter box
    (("question_mark",), "ctrl+c"),   # over the help screen
    (("question_mark",), "f10"),
])
async def test_f10_and_ctrl_c_quit(recording: Path, before: tuple[str, ...], quit_key: str) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*before)
        await pilot.press(quit_key)
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 0


@pytest.mark.parametrize("keys", [("C-c",), ("F10",), ("/", "55", "C-c")])
def test_the_real_dashboard_quits_cleanly_in_tmux(tmux: Tmux, bundled: Path, keys: tuple[str, ...]) -> None:
    tmux.start(f"{sys.executable} -m gpuwatch tui --replay {bundled} --speed 10")
    tmux.wait_screen("GPU-Util", "RECORDING")
    for key in keys:
        tmux("send-keys", "-t", "gw", key)
    status = tmux.wait_exit()
    screen = tmux.screen()
    assert status == 0, f"exit status {status} (None: still running 15 s after {keys[-1]})\n{screen}"
    assert "Traceback" not in screen and "KeyboardInterrupt" not in screen, screen
