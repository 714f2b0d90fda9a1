"""The local feed's doctor judges right after a tick, so its findings reach the screen in that tick's frame
(a frame of their own cost a second pass of the compositor and another update on the terminal)."""

from __future__ import annotations

import threading
import time

from conftest import SyntheticLive
from textual.message import Message

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


def test_the_doctor_judges_right_after_a_tick_not_between_two() -> None:
    feed = LocalFeed(Sampler(SyntheticLive(), interval=INTERVAL_S), "live via NVML", False, diagnose_every_s=0.3)
    target = Collector()
    feed.start(target)  # type: ignore[arg-type]
    try:
        time.sleep(6.5)
    finally:
        feed.stop()
    with target.lock:
        messages = list(target.messages)
    ticks = [at for at, m in messages if isinstance(m, SnapshotReady)]
    judged = [at for at, m in messages if isinstance(m, DiagnosisReady)]
    assert len(ticks) >= 5 and len(judged) >= 3, messages
    for at in judged:
        since_tick = at - max(t for t in ticks if t <= at)
        assert since_tick < INTERVAL_S / 2, f"judged {since_tick:.2f} s after a tick: ticks {ticks}, judged {judged}"
