"""The local feed posts the doctor's verdict with the next tick, so the findings reach the screen in that
tick's frame (a frame of their own cost a second pass of the compositor and another update on the
terminal); with no tick to come (paused, a recording that ended) the verdict is posted alone."""

from __future__ import annotations

import threading
import time

from conftest import SyntheticLive
from textual.message import Message

from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.sampler import Sampler
from gpuwatch.tui.feed import DiagnosisReady, LocalFeed, SnapshotReady

INTERVAL_S = 1.0


class Collector:
    """Stands in for the app: keeps each message the feed posts, with when it came."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[tuple[float, Message]] = []

    def post_message(self, message: Message) -> bool:
        with self.lock:
            self.messages.append((time.monotonic(), message))
        return True


def run_feed(producer: object, seconds: float) -> list[tuple[float, Message]]:
    feed = LocalFeed(Sampler(producer, interval=INTERVAL_S), "live via NVML", False,  # type: ignore[arg-type]
                     diagnose_every_s=0.3)
    target = Collector()
    feed.start(target)  # type: ignore[arg-type]
    try:
        time.sleep(seconds)
    finally:
        feed.stop()
    with target.lock:
        return list(target.messages)


def test_the_doctors_verdict_is_posted_with_the_next_tick() -> None:
    messages = run_feed(SyntheticLive(), 6.5)
    judged = [i for i, (_, m) in enumerate(messages) if isinstance(m, DiagnosisReady)]
    assert sum(isinstance(m, SnapshotReady) for _, m in messages) >= 5 and len(judged) >= 3, messages
    for i in judged:
        at, _ = messages[i]
        assert i + 1 < len(messages) or at == messages[-1][0], messages  # the last may wait for a tick to come
        if i + 1 < len(messages):
            after, tick = messages[i + 1]
            assert isinstance(tick, SnapshotReady) and after - at < INTERVAL_S / 4, messages


class Ending(SyntheticLive):
    """Three snapshots, then the end (as a recording that ends)."""

    def collect(self) -> Snapshot | None:
        return super().collect() if self.tick < 3 else None


def test_with_no_tick_to_come_the_verdict_is_posted_alone() -> None:
    messages = run_feed(Ending(), 5.0)
    last_tick = max(i for i, (_, m) in enumerate(messages) if isinstance(m, SnapshotReady))
    assert any(isinstance(m, DiagnosisReady) for _, m in messages[last_tick + 1:]), messages


def test_pausing_judges_the_paused_moment_at_once_not_at_the_doctors_next_round() -> None:
    sampler = Sampler(SyntheticLive(), interval=0.1)
    feed = LocalFeed(sampler, "live via NVML", False, diagnose_every_s=30.0)  # type: ignore[arg-type]
    target = Collector()
    feed.start(target)  # type: ignore[arg-type]
    try:
        time.sleep(1.5)  # the first verdict came at 0.5 s; the doctor's next round is 30 s away
        paused = time.monotonic()
        feed.pause(True)
        deadline = paused + 3.0
        while time.monotonic() < deadline and not _judged_newest(feed):
            time.sleep(0.05)
        assert _judged_newest(feed), "the verdict on screen is not the paused moment's"
        with target.lock:
            posted = [at for at, m in target.messages if isinstance(m, DiagnosisReady) and at > paused]
        assert posted and posted[-1] - paused < 2.0, posted
    finally:
        feed.stop()


def _judged_newest(feed: LocalFeed) -> bool:
    latest, newest = feed.diagnosis.latest, feed.sampler.history.latest()
    return latest is not None and newest is not None and latest.end == newest.time
