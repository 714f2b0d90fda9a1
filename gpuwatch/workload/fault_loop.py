"""The loop every injected fault runs: iterations until its time is up, readiness announced first."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

Ready = Callable[[], None]


class Loop:
    """Iterations numbered from 0 until ``duration`` seconds have passed; announces readiness first."""

    def __init__(self, duration: float, on_ready: Ready) -> None:
        self.duration, self.on_ready, self.count = duration, on_ready, 0

    def __iter__(self) -> Iterator[int]:
        self.on_ready()
        end = time.monotonic() + self.duration
        while time.monotonic() < end:
            yield self.count
            self.count += 1


def sync(torch: Any, dev: Any) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def free_bytes(torch: Any, dev: Any) -> int:
    return int(torch.cuda.mem_get_info(dev)[0]) if dev.type == "cuda" else 8 << 30
