"""How each receiver is doing, for /healthz: when it last took a notification, how many attempts in a row
it refused, and how old its oldest waiting notification is.

Outbox writes going well say nothing about delivery: a Slack URL that refuses every request leaves the
outbox healthy. This is the delivery side, and it turns /healthz unhealthy once a receiver has failed
(or held a notification pending) for longer than ``[notify] unhealthy_after``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class ReceiverStats:
    last_success: float | None = None
    last_failure: float | None = None
    consecutive_failures: int = 0
    #: Wall time of the first failure of the current streak (None while the last attempt succeeded).
    failing_since: float | None = None
    last_error: str | None = None


class ReceiverHealth:
    """Per-receiver delivery results (wall-clock), kept in memory by the deliverer."""

    def __init__(self, unhealthy_after_s: float) -> None:
        self.unhealthy_after_s = unhealthy_after_s
        self.stats: dict[str, ReceiverStats] = {}

    def succeeded(self, receiver: str, now: float) -> None:
        s = self.stats.setdefault(receiver, ReceiverStats())
        s.last_success, s.consecutive_failures, s.failing_since, s.last_error = now, 0, None, None

    def failed(self, receiver: str, now: float, error: str) -> None:
        s = self.stats.setdefault(receiver, ReceiverStats())
        s.last_failure, s.last_error = now, error[:300]
        s.consecutive_failures += 1
        if s.failing_since is None:
            s.failing_since = now

    def report(self, receivers: Iterable[str], oldest_pending: Mapping[str, float], now: float) -> dict[str, Any]:
        """``{"ok": ..., "receivers": {name: {...}}}``; ``oldest_pending`` maps a receiver to the creation time
        of its oldest pending row (receivers with none are absent)."""
        out: dict[str, Any] = {}
        ok = True
        for name in sorted({*receivers, *oldest_pending}):
            s = self.stats.get(name, ReceiverStats())
            pending_age = None if name not in oldest_pending else max(0.0, now - oldest_pending[name])
            failing_for = None if s.failing_since is None else max(0.0, now - s.failing_since)
            down = max(failing_for or 0.0, pending_age or 0.0) > self.unhealthy_after_s
            ok = ok and not down
            out[name] = {"ok": not down, "last_success": s.last_success,
                         "last_success_age_s": None if s.last_success is None else round(now - s.last_success, 3),
                         "consecutive_failures": s.consecutive_failures,
                         "failing_for_s": None if failing_for is None else round(failing_for, 3),
                         "oldest_pending_age_s": None if pending_age is None else round(pending_age, 3),
                         "last_error": s.last_error}
        return {"ok": ok, "unhealthy_after_s": self.unhealthy_after_s, "receivers": out}
