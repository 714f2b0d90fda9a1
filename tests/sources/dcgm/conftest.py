"""Fixtures for the DCGM source tests: a real HTTP exporter on 127.0.0.1 and a clock tests can move."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sources.dcgm.exporter import FakeExporter


@pytest.fixture
def exporter() -> Iterator[FakeExporter]:
    server = FakeExporter()
    yield server
    server.stop()


class ManualClock:
    """A monotonic clock that moves only when told, so back-off tests need no sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()
