"""Waiting on a running dashboard in tests: pump Textual's loop until a condition holds, or fail."""

from __future__ import annotations

import time
from typing import Any


async def wait_for(pilot: Any, predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if predicate():
            return
    raise AssertionError("condition not met in time")
