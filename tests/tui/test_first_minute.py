"""The first 20 seconds a new user sees: ``gpuwatch --replay`` of the bundled recording, launched in tmux at
80x24 and at 160x50 and captured twice a second. Nothing on screen may be false:

- while the doctor's window (30 s) is still filling, the Diagnosis pane says so ("watching: 12 of 30 s")
  and never "nothing to report";
- the history legend's figures are the means it names ("mean since 10:58:46", the first sample's time,
  until the window holds 5 min), recomputed here from the recording up to the snapshot the status line's
  clock shows;
- a finding's severity changes only when its figure (the share of time the GPU idles) crossed the
  hysteresis band: 2 points of the input-bound rule's score, 5 points of GPU-Util with its thread at 100 %.
"""

from __future__ import annotations

import calendar
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from tmux_pane import Tmux

from gpuwatch.model.recording import load
from gpuwatch.model.snapshot import Snapshot

WATCH_S = 20.0
DOCTOR_WINDOW_S = 30.0
PLOT_WINDOW_S = 300.0
#: GPU-Util points that 2 points of the input-bound rule's score stand for (score = 50 + 0.4 x idle share
#: with the thread at 100 %); shown figures are whole percents, so one point of rounding either way.
BAND_UTIL = 5 - 1
CLOCK = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC")
LEGEND = re.compile(r"(?:mean of last (?P<span>5 min)|mean since (?P<since>\d\d:\d\d:\d\d)|(?P<now>now)): "
                    r"GPU-Util (?P<util>\d+)%\s+vs\s+SM active (?P<sm>\d+)%\s+memory used (?P<mem>\d+)%")
BADGE = re.compile(r"\b(CRITICAL|WARNING)\b\s+(?:GPUs? [\d, ]+: )?Input pipeline")
IDLES = re.compile(r"the GPU idles (\d+)% of the time")


@dataclass
class Frame:
    screen: str
    time: float | None  # the snapshot the status line shows


def film(tmux: Tmux, bundled: Path, size: tuple[int, int]) -> list[Frame]:
    """Launch the bare command on the bundled recording and capture the pane twice a second for 20 s."""
    tmux.start(f"{sys.executable} -m gpuwatch --replay {bundled}", size)
    tmux.wait_screen("GPU-Util", timeout=30)
    frames = []
    end = time.monotonic() + WATCH_S
    while time.monotonic() < end:
        screen = tmux.screen()
        m = CLOCK.search(screen)
        t = float(calendar.timegm(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))) if m else None
        frames.append(Frame(screen, t))
        time.sleep(0.5)
    tmux("send-keys", "-t", "gw", "q")
    assert tmux.wait_exit() == 0
    return frames


def snapshot_at(snaps: list[Snapshot], shown: float) -> int:
    """Index of the snapshot whose UTC second the status line shows (the recording has one a second)."""
    matches = [i for i, s in enumerate(snaps) if int(s.time) == int(shown)]
    assert len(matches) == 1, (shown, matches)
    return matches[0]


def played_from(snaps: list[Snapshot]) -> int:
    """The dashboard plays the bundled recording from its first busy snapshot (the idle lead-in is not played)."""
    return next(i for i, s in enumerate(snaps) if (s.gpus[0].gpu_util or 0) >= 5)


def expected_legend(snaps: list[Snapshot], k: int) -> dict[str, str]:
    """What the legend must say at snapshot ``k``: means over ``(t - 300 s, t]`` of the history played so far."""
    t = snaps[k].time
    played = snaps[played_from(snaps):k + 1]
    inside = [s.gpus[0] for s in played if t - PLOT_WINDOW_S < s.time <= t]
    times = [s.time for s in played if t - PLOT_WINDOW_S < s.time <= t]

    def mean(values: list[float | None]) -> str:
        known = [v for v in values if v is not None]
        return f"{sum(known) / len(known):.0f}"

    n = len(inside)
    covered = (times[-1] - times[0]) * n / (n - 1) if n > 1 else 0.0
    span = "5 min" if covered >= 299.5 else f"since {time.strftime('%H:%M:%S', time.gmtime(times[0]))}"
    return {"span": "now" if n < 2 else span,
            "util": mean([g.gpu_util for g in inside]), "sm": mean([g.sm_active for g in inside]),
            "mem": mean([None if g.mem_used_ratio is None else g.mem_used_ratio * 100 for g in inside])}


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_the_first_20_seconds_say_nothing_false(tmux: Tmux, bundled: Path, size: tuple[int, int]) -> None:
    frames = film(tmux, bundled, size)
    snaps = load(bundled)
    assert len(frames) >= 30 and all(f.time is not None for f in frames[2:]), frames[-1].screen

    # 1. the window fills: said, and never "nothing to report" before it is full
    assert any("watching: " in f.screen for f in frames), frames[-1].screen
    for f in frames:
        if "nothing to report" in f.screen:
            assert f.time is not None
            k = snapshot_at(snaps, f.time)
            assert snaps[k].time - snaps[played_from(snaps)].time + 1 >= DOCTOR_WINDOW_S, f.screen

    # 2. the legend gives the window figure it names (the plot is shown from 120 columns)
    legends = 0
    for f in frames:
        m = LEGEND.search(f.screen)
        assert "last 5 min: GPU-Util" not in f.screen, f.screen  # the old, unnamed newest-column figure
        if m is None or f.time is None:
            continue
        legends += 1
        want = expected_legend(snaps, snapshot_at(snaps, f.time))
        span = "now" if m.group("now") else m.group("span") or f"since {m.group('since')}"
        got = {"span": span, "util": m.group("util"),
               "sm": m.group("sm"), "mem": m.group("mem")}
        assert got == want, f"at {time.strftime('%H:%M:%S', time.gmtime(f.time))}:\n{f.screen}"
    assert legends >= (30 if size[0] >= 120 else 0)

    # 3. severity changes only across the band
    last: tuple[str, int] | None = None  # (severity, idle %) at the last frame that showed both
    for f in frames:
        badge, idle = BADGE.search(f.screen), IDLES.search(f.screen)
        if badge is None or idle is None:
            continue
        now = (badge.group(1), int(idle.group(1)))
        if last is not None and now[0] != last[0]:
            moved = now[1] - last[1] if now[0] == "CRITICAL" else last[1] - now[1]  # worse: idles more
            assert moved >= BAND_UTIL, f"{last} -> {now} without crossing the band:\n{f.screen}"
        last = now


def test_quitting_leaves_no_log_line_on_the_terminal(tmux: Tmux) -> None:
    """Bare ``gpuwatch`` without a driver plays the bundled recording and says so in its banner; the same
    words logged before the screen opened used to stay on the terminal after ``q``."""
    tmux.start(f"{sys.executable} -m gpuwatch", (80, 24))
    screen = tmux.wait_screen("GPU-Util", timeout=30)
    if "RECORDING" not in screen:
        pytest.skip("this machine has a GPU: no bundled recording, nothing logged about it")
    tmux("send-keys", "-t", "gw", "q")
    assert tmux.wait_exit() == 0
    left = tmux.screen()
    assert "WARNING" not in left and "bundled" not in left, left
