"""On a machine with an NVIDIA GPU: the real dashboard samples it live (no RECORDING banner) and quits cleanly.

Run with ``pytest -m gpu tests/tui``."""

from __future__ import annotations

import sys
import time

import pytest
from tmux_pane import Tmux


@pytest.mark.gpu
def test_live_dashboard_in_tmux_shows_the_gpu_and_no_recording_banner(tmux: Tmux) -> None:
    tmux.start(f"{sys.executable} -m gpuwatch tui --interval 1")
    screen = tmux.wait_screen("GPU-Util", "SM occup", "NVIDIA", "live via NVML", timeout=30)
    assert "RECORDING" not in screen
    time.sleep(3)  # a few ticks: rates and GPM need two readings
    screen = tmux.screen()
    assert "gpm" in screen or "dcgm" in screen, "no profiling backend named beside SM activity"
    tmux("send-keys", "-t", "gw", "q")
    status = tmux.wait_exit()
    assert status == 0, f"exit status {status} (None: still running 15 s after q)\n{tmux.screen()}"
