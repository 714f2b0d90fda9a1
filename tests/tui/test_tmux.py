"""The acceptance check: the real ``gpuwatch tui --replay FILE`` in tmux at 160x50 shows the GPU panel with
GPU-Util and SM occupancy and a process table with pids, answers keys, and ``q`` exits cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools import require_tool


class Tmux:
    """A private tmux server (own socket and config) running one command in a 160x50 pane."""

    def __init__(self, tmux: str, tmp: Path) -> None:
        self.tmux = tmux
        self.socket = f"gpuwatch-test-{os.getpid()}"
        self.conf = tmp / "tmux.conf"
        self.conf.write_text("set -g remain-on-exit on\nset -g default-terminal tmux-256color\n"
                             "set -g default-size 160x50\n")

    def __call__(self, *args: str) -> str:
        done = subprocess.run([self.tmux, "-L", self.socket, "-f", str(self.conf), *args], capture_output=True,
                              text=True, timeout=20)
        return done.stdout

    def start(self, command: str) -> None:
        # COLUMNS/LINES inherited from a test runner would override the pane's real size.
        self("new-session", "-d", "-s", "gw", "-x", "160", "-y", "50", f"env -u COLUMNS -u LINES {command}")

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "gw")

    def wait_screen(self, *needles: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if all(n in text for n in needles):
                return text
            time.sleep(0.2)
        size = self.pane("#{window_width}x#{window_height} dead=#{pane_dead}")
        raise AssertionError(f"{needles} not on screen after {timeout} s ({size}):\n{text}")

    def pane(self, fmt: str) -> str:
        return self("display-message", "-p", "-t", "gw", fmt).strip()

    def close(self) -> None:
        self("kill-server")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(require_tool("tmux"), tmp_path)
    yield t
    t.close()


def test_bundled_replay_in_tmux_shows_the_panel_and_processes_answers_keys_and_q_exits_cleanly(
        tmux: Tmux, bundled: Path) -> None:
    tmux.start(f"{sys.executable} -m gpuwatch tui --replay {bundled} --speed 10")
    screen = tmux.wait_screen("GPU-Util", "SM occup", "NVIDIA H200", "RECORDING", " 558 ", " 603 ")
    assert "python3" in screen
    tmux("send-keys", "-t", "gw", "/")
    tmux.wait_screen("filter: pid, user or command")
    tmux("send-keys", "-t", "gw", "558", "Enter")
    screen = tmux.wait_screen("filter '558'")
    table = screen[screen.index("COMMAND"):screen.index("Alerts")]
    assert " 558 " in table and " 603 " not in table
    tmux("send-keys", "-t", "gw", "q")
    deadline = time.monotonic() + 15
    while not tmux.pane("#{pane_dead_status}") and time.monotonic() < deadline:  # set once tmux reaps it
        time.sleep(0.1)
    assert tmux.pane("#{pane_dead} #{pane_dead_status}") == "1 0", (
        tmux.pane("signal=#{pane_dead_signal}") + "\n" + tmux.screen())
