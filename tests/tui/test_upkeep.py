"""The dashboard runs the upkeep its command gives it (start-up's objects frozen, the allocator's free pages
handed back: ``runtime/memory.py``) on its own event loop, and stops it when it quits."""

from __future__ import annotations

import asyncio
from pathlib import Path

from conftest import replay_app

from gpuwatch.runtime import memory


class Recorder(memory.Releaser):
    """A real releaser, every 10 ms, that remembers the loop it ran on (no freeze: the test process's objects
    are its own)."""

    def __init__(self) -> None:
        super().__init__(first_s=0.01, every_s=0.01, freeze_s=None)
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        super().start(loop)


async def test_the_upkeep_releases_on_the_dashboards_loop_while_it_runs_and_stops_when_it_quits(
        recording: Path) -> None:
    app = replay_app(recording, 5)
    upkeep = Recorder()
    app.upkeep = upkeep
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.1)
        assert upkeep.loop is asyncio.get_running_loop()
        assert upkeep.releases >= 1
    stopped_at = upkeep.releases
    await asyncio.sleep(0.05)
    assert upkeep.releases == stopped_at

