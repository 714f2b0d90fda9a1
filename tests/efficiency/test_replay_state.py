"""A demo never touches real data: ``gpuwatch daemon --replay`` of the bundled recording, in a real process
whose HOME and XDG directories are a temporary folder, accounts the recording's GPU-hours and keeps its
outbox in a throwaway directory, and leaves nothing behind in HOME."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
import requests
from daemon.process import DaemonProcess

from efficiency.test_daemon import counters
from gpuwatch.data import bundled_recording

pytestmark = pytest.mark.slow


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_replay_of_the_bundled_recording_writes_no_state_into_home(tmp_path: Path) -> None:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("STATE_DIRECTORY", "XDG_STATE_HOME")}
    env.update(HOME=str(home), XDG_STATE_HOME=str(home / ".local/state"), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_DATA_HOME=str(home / ".local/share"), XDG_CACHE_HOME=str(home / ".cache"), TMPDIR=str(tmp))
    daemon = DaemonProcess(None, bundled_recording(), tmp_path / "daemon.log", extra=("--speed", "0"), env=env)
    log, url = daemon.log, daemon.url
    try:
        daemon.wait_healthy()
        deadline = time.monotonic() + 30
        while not any(name == "gpuwatch_gpu_seconds_total" and value > 0
                      for (name, _), value in counters(url).items()):  # the recording is being accounted
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        said = re.search(r"go to (\S+) \(removed on exit\)", log.read_text())
        assert said, log.read_text()
        throwaway = Path(said.group(1))
        assert throwaway.is_relative_to(tmp) and "outbox.sqlite" in " ".join(_files(throwaway))
        assert requests.get(url + "/healthz", timeout=5).status_code == 200
    finally:
        assert daemon.stop(15) == 0, log.read_text()
    assert _files(home) == []
    assert not throwaway.exists()
