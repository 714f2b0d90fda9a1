"""Going back in time on a paused dashboard: the moment each key reaches, what every pane shows there (checked
against the recording read with the codec), the marker, and the one key back to live."""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from pathlib import Path

import pytest
from conftest import replay_app
from synthetic import snapshot
from tmux_pane import Tmux

from gpuwatch.doctor import diagnose_current
from gpuwatch.model.alert import Alert
from gpuwatch.model.recording import iter_snapshots
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.history import History
from gpuwatch.tui import timetravel
from gpuwatch.tui.app import GpuWatchApp
from gpuwatch.tui.format import num, pct
from gpuwatch.tui.status import status_line
from gpuwatch.tui.widgets.alerts_pane import AlertsPane
from gpuwatch.tui.widgets.diagnosis_pane import DiagnosisPane, FindingsText
from gpuwatch.tui.widgets.gpu_panel import GpuPanel
from gpuwatch.tui.widgets.history_plot import HistoryPlot
from gpuwatch.tui.widgets.lines import TextLine
from gpuwatch.tui.widgets.process_table import ProcessTable

SIZE = (160, 50)
TICKS = 200


def history_of(times: list[float]) -> History:
    history = History(capacity=100)
    for i, t in enumerate(times):
        history.append(dataclasses.replace(snapshot(i), time=t))
    return history


# -- the moment each step reaches ---------------------------------------------------------------------
def test_a_moment_shows_the_newest_snapshot_at_or_before_it_and_never_one_from_after() -> None:
    history = history_of([100.0, 101.0, 102.0, 103.0])
    assert timetravel.snapshot_at(history, 102.0).time == 102.0  # type: ignore[union-attr]
    assert timetravel.snapshot_at(history, 102.9).time == 102.0  # type: ignore[union-attr]
    assert timetravel.snapshot_at(history, 50.0).time == 100.0  # type: ignore[union-attr]  # before all: the oldest
    assert timetravel.snapshot_at(History(), 1.0) is None


def test_steps_go_by_samples_or_seconds_and_stop_at_either_end_of_the_history() -> None:
    history = history_of([100.0, 101.0, 102.5, 103.0, 110.0])
    assert timetravel.step(history, 110.0, ticks=-1) == 103.0
    assert timetravel.step(history, 103.0, ticks=2) == 110.0
    assert timetravel.step(history, 101.0, ticks=-5) == 100.0  # the oldest kept
    assert timetravel.step(history, 103.0, ticks=9) == 110.0  # the newest
    assert timetravel.step(history, 110.0, seconds=-7.5) == 102.5  # at or before 102.5
    assert timetravel.step(history, 110.0, seconds=-8) == 101.0
    assert timetravel.step(history, 100.0, seconds=60) == 110.0
    assert timetravel.step(history, 110.0, seconds=-600) == 100.0


def test_the_plots_history_is_cut_at_the_moment() -> None:
    history = history_of([100.0, 101.0, 102.0, 103.0])
    cut = timetravel.history_until(history, 101.5)
    assert [s.time for s in cut] == [100.0, 101.0] and cut.capacity == history.capacity


@pytest.mark.parametrize(("behind", "words"), [(0.2, "PAUSED at 14:03:12"), (12, "PAUSED at 14:03:12 (−12 s)"),
                                               (130, "PAUSED at 14:03:12 (−2 min 10 s)"),
                                               (60, "PAUSED at 14:03:12 (−1 min)"),
                                               (3725, "PAUSED at 14:03:12 (−1 h 2 min)")])
def test_the_marker_says_the_moment_and_how_far_behind_the_newest_sample_it_is(behind: float, words: str) -> None:
    moment = 1_796_220_192.0  # 14:03:12 UTC
    assert time.strftime("%H:%M:%S", time.gmtime(moment)) == "14:03:12"
    assert timetravel.marker(moment, moment + behind) == words


def test_the_status_line_leads_with_the_marker_so_a_narrow_terminal_still_shows_it() -> None:
    snap = snapshot(3)
    line = status_line(snap, "", paused=True, sort="gmem", reverse=True, tree=False, gpu_filter=None,
                       filter_text="", moment="PAUSED at 14:03:12 (−2 min 10 s)").plain
    assert line.startswith(" gpuwatch  PAUSED at 14:03:12 (−2 min 10 s) · l live ")
    assert "p resumes" not in line and snap.host.hostname in line


def test_alerts_are_shown_as_they_stood_at_the_moment() -> None:
    def alert(name: str, state: str, active: float, fired: float | None = None,
              resolved: float | None = None) -> Alert:
        return Alert(name, name, {"severity": "warning"}, {}, state, active, fired, resolved)  # type: ignore[arg-type]

    now = (alert("firing-since-90", "firing", 80.0, 90.0), alert("later", "pending", 150.0),
           alert("resolved-at-120", "resolved", 50.0, 60.0, 120.0), alert("resolved-at-95", "resolved", 50, 60, 95))
    then = {a.name: a.state for a in timetravel.alerts_at(now, 100.0) or ()}
    assert then == {"firing-since-90": "firing", "resolved-at-120": "firing", "resolved-at-95": "resolved"}
    assert {a.name: a.state for a in timetravel.alerts_at(now, 85.0) or ()}["firing-since-90"] == "pending"
    assert timetravel.alerts_at(None, 100.0) is None


# -- the dashboard --------------------------------------------------------------------------------------
def recorded_at(recorded: list[Snapshot], moment: float) -> Snapshot:
    return max((s for s in recorded if s.time <= moment), key=lambda s: s.time)


def shown(app: GpuWatchApp) -> dict[str, object]:
    """What the panes show now, in the recording's terms."""
    panel = app.query_one(GpuPanel)
    table = app.query_one(ProcessTable)
    return {"gpu": panel.gpu, "procs": sorted((s.pid, s.cpu_percent) for s in table.samples.values())}


async def test_going_back_a_minute_shows_that_moment_in_every_pane_and_l_returns_to_live(bundled: Path) -> None:
    recorded = list(iter_snapshots(bundled))
    app = replay_app(bundled, TICKS)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        newest = app.feed.sampler.history.latest()  # type: ignore[attr-defined]
        assert newest is not None and newest.time == recorded[TICKS - 1].time
        live = shown(app)

        await pilot.press("less_than_sign")
        then = recorded_at(recorded, newest.time - 60)
        assert app.dashboard.paused and app.dashboard.moment == then.time
        panel = app.query_one(GpuPanel).gpu
        assert panel is not None and then.gpus[0].gpu_util is not None
        assert (panel.gpu_util, panel.power_w, panel.mem_used_bytes, panel.sm_active) == (
            then.gpus[0].gpu_util, then.gpus[0].power_w, then.gpus[0].mem_used_bytes, then.gpus[0].sm_active)
        assert shown(app)["procs"] == sorted((p.pid, p.cpu_percent) for p in then.processes)
        assert shown(app) != live  # the recording moved in that minute: the check can fail
        status = app.query_one("#status", TextLine).plain
        clock = time.strftime("%H:%M:%S", time.gmtime(then.time))
        assert f"PAUSED at {clock} (−1 min" in status and "l live" in status, status
        # the history plot ends at the moment too
        plot = app.query_one(HistoryPlot)
        assert plot._source is not None and plot._source[0].latest().time == then.time  # type: ignore[union-attr]
        assert plot.plain.rstrip().endswith(clock) and "now" not in plot.plain  # its time axis ends there

        # the Diagnosis pane: the doctor over the window that ends at the moment, named by its time
        window = app.feed.diagnosis_window_s
        expected = diagnose_current([s for s in recorded if s.time <= then.time], window)
        pane = app.query_one(DiagnosisPane)
        text = app.query_one(FindingsText).plain
        assert pane.border_title is not None and f"at {clock}" in str(pane.border_title)
        assert expected, "the recording has a finding at that moment"
        for finding in expected:
            assert (finding.title or finding.code) in text, text
        assert app.query_one(AlertsPane) is not None

        await pilot.press("l")
        assert not app.dashboard.paused and app.dashboard.moment is None
        assert shown(app) == live
        assert "PAUSED" not in app.query_one("#status", TextLine).plain
        assert f"at {clock}" not in str(app.query_one(DiagnosisPane).border_title)


async def test_single_steps_move_one_sample_and_stop_at_the_newest(bundled: Path) -> None:
    recorded = list(iter_snapshots(bundled))
    app = replay_app(bundled, 60)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("left_square_bracket", "left_square_bracket", "left_square_bracket")
        assert app.dashboard.moment == recorded[56].time
        await pilot.press("right_square_bracket")
        assert app.dashboard.moment == recorded[57].time
        await pilot.press("left_curly_bracket")
        assert app.dashboard.moment == recorded_at(recorded, recorded[57].time - 10).time
        await pilot.press("greater_than_sign", "right_square_bracket")
        assert app.dashboard.moment == recorded[59].time and app.dashboard.paused
        await pilot.press("less_than_sign", "less_than_sign")  # past the oldest sample kept: stops there
        assert app.dashboard.moment == recorded[0].time
        assert any("oldest sample kept" in str(n.message) for n in app._notifications)
        await pilot.press("p")  # p resumes as well
        assert not app.dashboard.paused and app.dashboard.moment is None


# -- the real program in tmux ---------------------------------------------------------------------------
CLOCK = re.compile(r" · \d{4}-\d\d-\d\d (\d\d:\d\d:\d\d) UTC · ")


def status_clock(screen: str) -> str:
    found = CLOCK.search(screen.splitlines()[0])
    assert found, screen.splitlines()[0]
    return found.group(1)


def seconds_of(clock: str) -> int:
    h, m, s = (int(x) for x in clock.split(":"))
    return h * 3600 + m * 60 + s


def line_starting(screen: str, *words: str) -> str:
    return next(line for line in screen.splitlines() if line.split()[:len(words)] == list(words))


def numbers_shown(snap: Snapshot) -> tuple[str, ...]:
    g = snap.gpus[0]
    return (pct(g.gpu_util), pct(g.sm_active), num(g.power_w), *(pct(p.cpu_percent) for p in snap.processes))


def test_tmux_a_paused_replay_goes_back_60_s_shows_that_moments_numbers_then_l_returns_to_live(
        tmux: Tmux, bundled: Path) -> None:
    recorded = {time.strftime("%H:%M:%S", time.gmtime(s.time)): s for s in iter_snapshots(bundled)}
    assert len(recorded) == len(list(iter_snapshots(bundled))), "one snapshot per second: a clock names one"
    first = seconds_of(min(recorded))
    tmux.start(f"{sys.executable} -m gpuwatch tui --replay {bundled} --speed 10")
    tmux.wait_screen("GPU-Util", "RECORDING", " 558 ", timeout=40)
    deadline = time.monotonic() + 60
    while seconds_of(status_clock(tmux.screen())) < first + 100:  # a minute back is well inside the history
        assert time.monotonic() < deadline, tmux.screen()
        time.sleep(0.2)

    tmux("send-keys", "-t", "gw", "p")
    paused_at = status_clock(tmux.wait_screen("PAUSED at"))
    tmux("send-keys", "-t", "gw", "<")
    screen = tmux.wait_screen("(−1 min", "Diagnosis at")
    moment = status_clock(screen)
    assert f"PAUSED at {moment} (−1 min" in screen.splitlines()[0]
    assert seconds_of(paused_at) - seconds_of(moment) in (60, 61)  # the newest sample at or before 60 s back
    then = recorded[moment]
    gpu = then.gpus[0]

    # the GPU panel and the process table: that moment's numbers, as the recording has them
    assert pct(gpu.gpu_util).strip() in line_starting(screen, "GPU-Util").split("SM active")[0]
    assert pct(gpu.sm_active).strip() in line_starting(screen, "GPU-Util").split("SM active")[1]
    assert f"{num(gpu.power_w)}/{num(gpu.power_limit_w)} W" in line_starting(screen, "power")
    for proc in then.processes:
        row = line_starting(screen, str(proc.pid)).split()
        assert (row[4], row[5]) == (pct(proc.sm_util).strip(), pct(proc.cpu_percent).strip()), row
    # ... and the Diagnosis pane: the doctor's verdict on the window that ends at the moment
    findings = diagnose_current([s for s in recorded.values() if s.time <= then.time], 30.0)
    assert findings
    title = next(line for line in screen.splitlines() if "Diagnosis at" in line)
    assert f"Diagnosis at {moment} · {len(findings)} finding" in title, title
    for finding in findings:
        assert finding.title in screen, finding.title
    # the paused (newest) moment reads differently, so the checks above tell the two apart
    assert numbers_shown(recorded[paused_at]) != numbers_shown(then)

    tmux("send-keys", "-t", "gw", "l")
    deadline = time.monotonic() + 20
    while "PAUSED" in (screen := tmux.screen()) or seconds_of(status_clock(screen)) <= seconds_of(paused_at):
        assert time.monotonic() < deadline, screen
        time.sleep(0.2)
    assert "Diagnosis at" not in screen
    tmux("send-keys", "-t", "gw", "q")
    assert tmux.wait_exit() == 0


async def test_a_tick_landing_after_p_stays_off_the_screen_and_going_back_starts_from_the_paused_moment(
        bundled: Path) -> None:
    recorded = list(iter_snapshots(bundled))
    app = replay_app(bundled, 100)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("p")
        app.feed.sampler.tick()  # type: ignore[attr-defined]  # a tick already under way when p was pressed
        await pilot.pause()
        assert app.feed.sampler.history.latest().time == recorded[100].time  # type: ignore[attr-defined]
        await pilot.resize_terminal(150, 50)  # every pane drawn again
        await pilot.pause()
        paused = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(recorded[99].time))
        status = app.query_one("#status", TextLine).plain
        assert f"PAUSED at {paused[11:]} (−1 s) · l live" in status and f"· {paused} UTC ·" in status, status
        await pilot.press("left_square_bracket")
        assert app.dashboard.moment == recorded[98].time
