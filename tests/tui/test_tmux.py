"""The acceptance check: the real ``gpuwatch tui --replay FILE`` in tmux at 160x50 shows the GPU panel with
GPU-Util and SM occupancy and a process table with pids, answers keys (filter, Enter for details), and ``q``
exits cleanly."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tmux_pane import Tmux


def test_bundled_replay_in_tmux_shows_the_panel_and_processes_answers_keys_and_q_exits_cleanly(
        tmux: Tmux, bundled: Path) -> None:
    tmux.start(f"{sys.executable} -m gpuwatch tui --replay {bundled} --speed 10")
    # The worker's row, as the COMMAND column shows it: not the interpreter's path and flags.
    tmux.wait_screen("GPU-Util", "SM occup", "NVIDIA H200", "RECORDING", " 603 ",
                     " 558      root      0 ", "[mp worker of 554] spawn_main(tracker_fd=4, pipe_handle=6)")
    tmux("send-keys", "-t", "gw", "/")
    tmux.wait_screen("filter: pid, user or command")
    tmux("send-keys", "-t", "gw", "558", "Enter")
    screen = tmux.wait_screen("filter '558'")
    table = screen[screen.index("COMMAND"):screen.index("Alerts")]
    assert " 558 " in table and " 603 " not in table
    tmux("send-keys", "-t", "gw", "Enter")  # nvitop's Enter: the process in full
    tmux.wait_screen("pid 558 on GPU 0", "command line", "/opt/torch/.venv/bin/python3 -B -c", "--multiprocessing-fork")
    tmux("send-keys", "-t", "gw", "Escape")
    deadline = time.monotonic() + 10
    while "command line" in tmux.screen():  # the details close
        assert time.monotonic() < deadline, tmux.screen()
        time.sleep(0.1)
    tmux("send-keys", "-t", "gw", "q")
    status = tmux.wait_exit()
    assert status == 0, f"exit status {status} (None: still running 15 s after q)\n{tmux.screen()}"
