"""A private tmux server running one command in a pane (160x50 unless told), for tests that drive the real
program."""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from pathlib import Path

#: Each Tmux its own server socket: a server told to stop (``kill-server``) exits after the command returns,
#: and a next test's session started on the same socket could land in the dying server and vanish with it.
_SERVERS = itertools.count()


class Tmux:
    """A private tmux server (own socket and config) running one command in a 160x50 pane."""

    def __init__(self, tmux: str, tmp: Path) -> None:
        self.tmux = tmux
        self.socket = f"gpuwatch-test-{os.getpid()}-{next(_SERVERS)}"
        self.conf = tmp / "tmux.conf"
        self.exit_file = tmp / "exit-status"
        self.conf.write_text("set -g remain-on-exit on\nset -g default-terminal tmux-256color\n"
                             "set -g default-size 160x50\n")

    def __call__(self, *args: str) -> str:
        done = subprocess.run([self.tmux, "-L", self.socket, "-f", str(self.conf), *args], capture_output=True,
                              text=True, timeout=20)
        return done.stdout

    def start(self, command: str, size: tuple[int, int] = (160, 50)) -> None:
        """Run ``command`` in a pane of ``size`` (columns, lines); its exit status lands in ``exit_file``
        (tmux's own is set only once it has reaped the process, which a busy machine can delay)."""
        # COLUMNS/LINES inherited from a test runner would override the pane's real size.
        wrapped = f"env -u COLUMNS -u LINES {command}; echo $? > {self.exit_file}"
        self("new-session", "-d", "-s", "gw", "-x", str(size[0]), "-y", str(size[1]), wrapped)

    def wait_exit(self, timeout: float = 15.0) -> int | None:
        """The command's exit status, or None if it is still running after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.exit_file.exists() and self.exit_file.read_text().strip():
                return int(self.exit_file.read_text().strip())
            time.sleep(0.1)
        return None

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
