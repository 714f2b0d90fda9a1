"""Dashboards built the way the CLI builds them, over recordings and synthetic live-like producers.

``prime`` ticks the sampler on the test's thread before the app starts and no sampler thread runs, so
what the screen shows is fixed by the recording and the tick count alone (no wall clock, no races)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from synthetic import snapshot, write_recording
from tmux_pane import Tmux
from tools import require_tool

from gpuwatch.data import bundled_recording
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.sampler import Sampler
from gpuwatch.sources.replay import ReplayProducer
from gpuwatch.tui.app import GpuWatchApp, make_app
from gpuwatch.tui.feed import local_feed

BUNDLED_FALLBACK_SECONDS = 240


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests on a fresh event loop (Textual's run_test is async; no plugin needed)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True


@pytest.fixture(scope="session")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One GPU, four minutes shaped like the incident."""
    return write_recording(tmp_path_factory.mktemp("rec") / "h200-incident-synthetic.ndjson.gz",
                           BUNDLED_FALLBACK_SECONDS, gpus=1)


@pytest.fixture(scope="session")
def bundled() -> Path:
    """The real H200 recording shipped in the package (naive serving 10-340 s, FP32 batched, then bf16)."""
    path = bundled_recording()
    assert path.exists(), f"{path} is missing: the package ships it (gpuwatch/data)"
    return path


@pytest.fixture(scope="session")
def recording_2gpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_recording(tmp_path_factory.mktemp("rec2") / "two-gpus.ndjson.gz", 90, gpus=2)


def replay_app(path: Path, ticks: int) -> GpuWatchApp:
    """The dashboard over ``path`` after ``ticks`` snapshots, with the shipped alert rules."""
    feed = local_feed(Sampler(ReplayProducer(path, speed=0)), f"recording: {path.name}", True, run_sampler=False)
    feed.prime(ticks)
    return make_app(feed)


class SyntheticLive:
    """A live-looking producer (origin 'live') whose snapshots list ``extra_pids`` as GPU processes."""

    def __init__(self, extra_pids: tuple[int, ...] = (), gpus: int = 1) -> None:
        self.extra_pids = extra_pids
        self.gpus = gpus
        self.tick = 0

    def collect(self) -> Snapshot | None:
        snap = snapshot(self.tick, self.gpus, self.extra_pids, host="this-host")
        self.tick += 1
        return dataclasses.replace(snap, origin="live")

    def close(self) -> None:
        pass


def live_app(extra_pids: tuple[int, ...] = (), gpus: int = 1, ticks: int = 3) -> GpuWatchApp:
    feed = local_feed(Sampler(SyntheticLive(extra_pids, gpus)), "live via NVML", False, rule_paths=[],
                      run_sampler=False)
    feed.prime(ticks)
    return make_app(feed)


@pytest.fixture
def make_replay_app(recording: Path) -> Callable[[int], GpuWatchApp]:
    return lambda ticks: replay_app(recording, ticks)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    """tmux is required in CI (GPUWATCH_REQUIRE_TOOLS=1); elsewhere the test is skipped without it."""
    t = Tmux(require_tool("tmux"), tmp_path)
    yield t
    t.close()
