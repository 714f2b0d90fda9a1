"""``gpuwatch tui --connect`` against a real ``gpuwatch daemon`` on 127.0.0.1 replaying the bundled recording."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from healthz import wait_healthy
from pilot_wait import wait_for

from gpuwatch.model.recording import iter_snapshots
from gpuwatch.tui.app import make_app
from gpuwatch.tui.remote import RemoteFeed
from gpuwatch.tui.widgets.diagnosis_pane import DiagnosisPane
from gpuwatch.tui.widgets.fleet_table import FleetTable
from gpuwatch.tui.widgets.gpu_panel import GpuPanel
from gpuwatch.tui.widgets.lines import TextLine
from gpuwatch.tui.widgets.process_table import ProcessTable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_daemon(bundled: Path, tmp_path: Path, *speed: str) -> Iterator[str]:
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text("")
    log = (tmp_path / "daemon.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--config", str(config), "--replay",
                             str(bundled), *speed, "--listen", f"127.0.0.1:{port}",
                             "--state-dir", str(tmp_path / "state")], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, 30, log=(tmp_path / "daemon.log").read_text, any_answer=True)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture
def daemon(bundled: Path, tmp_path: Path) -> Iterator[str]:
    yield from start_daemon(bundled, tmp_path, "--speed", "10", "--loop")


@pytest.fixture
def played_daemon(bundled: Path, tmp_path: Path) -> Iterator[str]:
    """A daemon that has played the whole recording at once: its history is all there is."""
    yield from start_daemon(bundled, tmp_path, "--speed", "0")


async def test_the_fleet_view_shows_a_live_daemon_its_processes_and_its_recording_banner(daemon: str) -> None:
    app = make_app(RemoteFeed([daemon]))
    async with app.run_test(size=(160, 50)) as pilot:
        fleet = app.query_one(FleetTable)
        await wait_for(pilot, lambda: any(str(fleet.cells[k][2]) == "H200" for k in fleet.keys), timeout=20)
        assert str(fleet.cells[fleet.keys[0]][0]) == "vm"  # the recorded machine's hostname
        await wait_for(pilot, lambda: 558 in {p.pid for p in app.query_one(ProcessTable).samples.values()},
                       timeout=20)
        banner: Any = app.query_one("#banner")
        assert banner.display and "RECORDING" in str(banner.render())
        await pilot.press("k")
        assert any("connected to daemons" in str(n.message) for n in app._notifications)


async def test_right_after_connecting_the_dashboard_goes_back_a_minute_through_the_daemons_history(
        played_daemon: str, bundled: Path) -> None:
    wait_played(played_daemon)
    recorded = list(iter_snapshots(bundled))
    app = make_app(RemoteFeed([played_daemon]))
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: app.query_one(GpuPanel).gpu is not None, timeout=20)
        history = app.feed.histories[played_daemon]  # type: ignore[attr-defined]
        newest = history.latest()
        assert newest is not None and newest.time == recorded[-1].time
        assert len(history) > 300  # the daemon's ten minutes came at once, not one snapshot per tick
        await pilot.press("less_than_sign")
        then = max((s for s in recorded if s.time <= newest.time - 60), key=lambda s: s.time)
        assert app.dashboard.moment == then.time
        panel = app.query_one(GpuPanel).gpu
        assert panel is not None and (panel.gpu_util, panel.power_w) == (then.gpus[0].gpu_util, then.gpus[0].power_w)
        assert sorted(p.pid for p in app.query_one(ProcessTable).samples.values()) == sorted(
            p.pid for p in then.processes)
        clock = time.strftime("%H:%M:%S", time.gmtime(then.time))
        assert f"at {clock}" in str(app.query_one(DiagnosisPane).border_title)
        assert f"PAUSED at {clock} (−1 min" in app.query_one("#status", TextLine).plain
        await pilot.press("l")
        assert app.dashboard.moment is None and not app.dashboard.paused
        assert app.query_one(GpuPanel).gpu.gpu_util == recorded[-1].gpus[0].gpu_util  # type: ignore[union-attr]


def wait_played(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while requests.get(url + "/healthz", timeout=5).json().get("sampler") != "finished":
        assert time.monotonic() < deadline, "the daemon did not finish playing the recording"
        time.sleep(0.2)
