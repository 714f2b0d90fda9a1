"""Fixtures: a recording of the synthetic incident and a real daemon on a free loopback port."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from notify.receiver import Receiver

from daemon.incident import write_recording
from gpuwatch.config import Config, DaemonConfig
from gpuwatch.daemon.runner import Daemon
from gpuwatch.sampler.sampler import Sampler
from gpuwatch.sources.replay import ReplayProducer


class RunningDaemon:
    """``Daemon.run()`` on its own thread and event loop, serving on 127.0.0.1 at a free port."""

    def __init__(self, config: Config, recording: Path, speed: float = 0.0) -> None:
        sampler = Sampler(ReplayProducer(recording, speed=speed), interval=config.sampler.interval)
        self.daemon = Daemon(config, sampler, f"recording: {recording.name}", True, reload_config=lambda: config)
        self.result: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 15
        while self.daemon.bound_port is None or not self.daemon.pipeline.first_snapshot.is_set():
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise AssertionError("the daemon did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.daemon.bound_port}"

    def _run(self) -> None:
        self.result = asyncio.run(self.daemon.run())

    def wait_evaluated(self, n: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while self.daemon.pipeline.evaluated < n:
            assert time.monotonic() < deadline, f"only {self.daemon.pipeline.evaluated} snapshots evaluated"
            time.sleep(0.02)

    def stop(self) -> int | None:
        self.daemon.request_stop()
        self.thread.join(20)
        return self.result


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return write_recording(tmp_path / "incident.ndjson.gz", n=120)


@pytest.fixture
def base_config(tmp_path: Path) -> Config:
    return Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "state")))


@pytest.fixture
def running(base_config: Config, recording: Path) -> Iterator[RunningDaemon]:
    d = RunningDaemon(base_config, recording)
    yield d
    d.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A real webhook receiver on 127.0.0.1 (see tests/notify/receiver.py)."""
    r = Receiver()
    yield r
    r.close()
