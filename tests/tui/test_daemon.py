"""``gpuwatch tui --connect`` against a real ``gpuwatch daemon`` on 127.0.0.1 replaying the bundled recording."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from healthz import wait_healthy
from pilot_wait import wait_for

from gpuwatch.tui.app import make_app
from gpuwatch.tui.remote import RemoteFeed
from gpuwatch.tui.widgets.fleet_table import FleetTable
from gpuwatch.tui.widgets.process_table import ProcessTable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def daemon(bundled: Path, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text("")
    log = (tmp_path / "daemon.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--config", str(config), "--replay",
                             str(bundled), "--speed", "10", "--loop", "--listen", f"127.0.0.1:{port}",
                             "--state-dir", str(tmp_path / "state")], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, 30, log=(tmp_path / "daemon.log").read_text, any_answer=True)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


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
