"""The acceptance check: the real ``gpuwatch tui --replay FILE`` in tmux at 160x50 shows the GPU panel with
GPU-Util and SM occupancy and a process table with pids, answers keys (filter, Enter for details), and ``q``
exits cleanly."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from tmux_pane import Tmux


def test_bundled_replay_in_tmux_shows_the_panel_and_processes_answers_keys_and_q_exits_cleanly(
        tmux: Tmux, bundled: Path) -> None:
    tmux.start(f"{sys.executable} -m gpuwatch tui --replay {bundled} --speed 10")
    # The worker's row, as the COMMAND column shows it: not the interpreter's path and flags.
    tmux.wait_screen("GPU-Util", "SM occup", "NVIDIA H200", "RECORDING", " 603 ",
                     " 558      root      0 ", "[mp worker 1 of 554]", "[mp worker 2 of 554]")
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


#: What a chart or a bar draws with: none of these may appear inside the panes under the process table.
CHART_GLYPHS = frozenset("▁▂▃▄▅▆▇█▏▎▍▌▋▊▉")


def _panes_below_the_table(screen: list[str]) -> list[tuple[str, list[str]]]:
    """Each bordered pane (its title line, the lines inside its borders) under the process table."""
    panes = []
    for top, line in enumerate(screen):
        at = line.find("╭─")
        while at != -1:
            right = line.find("╮", at)
            bottom = next(i for i in range(top + 1, len(screen)) if screen[i][at:at + 1] == "╰")
            panes.append((line[at:right + 1], [row[at + 1:right] for row in screen[top + 1:bottom]]))
            at = line.find("╭─", right)
    return panes


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
def test_at_80x24_and_160x50_the_banner_is_whole_charts_stay_in_their_pane_and_workers_read_apart(
        tmux: Tmux, bundled: Path, size: tuple[int, int]) -> None:
    tmux.start(f"{sys.executable} -m gpuwatch tui --replay bundled --speed 10", size=size)
    # past the first diagnosis: the findings overflow their pane at 80x24 (its scrollbar is on screen)
    # at 160 columns the history plot is on screen: its time axis says how far back it reaches
    axis = ("5 min ago", "now") if size[0] >= 160 else ()
    text = tmux.wait_screen("Diagnosis ·", "mp worker 1", "mp worker 2", *axis, timeout=40)
    screen = text.splitlines()
    banner = next(line for line in screen if "RECORDING" in line)
    assert banner.strip().endswith("— replayed, not live") and len(banner.rstrip()) <= size[0], banner
    table = next(i for i, line in enumerate(screen) if "PID" in line and "COMMAND" in line)
    rows = {line.split()[0]: line for line in screen[table + 1:table + 3]}
    assert set(rows) == {"558", "603"}, screen[table:table + 3]
    names = {pid: row[row.index("[mp worker"):].strip() for pid, row in rows.items()}
    assert names["558"] != names["603"], names
    panes = _panes_below_the_table(screen[table:])
    assert {title.split()[1] for title, _ in panes} == {"Alerts", "Diagnosis"}, panes
    for title, inside in panes:
        drawn = [line for line in inside if CHART_GLYPHS & set(line)]
        assert not drawn, f"chart cells inside {title}:\n" + "\n".join(drawn)
    if axis:  # under the plot, above the table
        assert all(word in "\n".join(screen[:table]) for word in axis), screen[:table]
    tmux("send-keys", "-t", "gw", "q")
    assert tmux.wait_exit() == 0
