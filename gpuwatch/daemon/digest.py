"""The digest on a schedule (``[digest]``): the daemon renders ``gpuwatch report --format markdown`` from its
own roll-ups and queues it for the named receivers through the outbox, like any notification (signed,
retried, dead-lettered after ``[notify] max_age``).

The slots are fixed times (``every`` from ``at``, UTC), and the last slot sent is written in the same
transaction as the queued requests: a restart neither sends a slot twice nor skips one. A daemon that was
down over one or more slots sends one digest when it comes back (for the newest of them), not a backlog; a
daemon started for the first time waits for the next slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import time
import uuid
from collections.abc import Callable, Sequence

from gpuwatch.config.fields import day_time_offset
from gpuwatch.config.model import Config, DigestConfig, ReceiverConfig
from gpuwatch.daemon.server import App
from gpuwatch.efficiency import digest, digest_markdown
from gpuwatch.efficiency.service import Accounting
from gpuwatch.model.rollout import Rollout
from gpuwatch.notify.outbox import Outbox
from gpuwatch.notify.payloads import digest_body

log = logging.getLogger(__name__)
DAY = 86400.0
#: Retry delay when nothing is accounted yet or the outbox refused the write.
RETRY_S = 10.0
KEY = "digest"


def offset(at: str) -> float:
    """Seconds after 1970-01-01 00:00 UTC (a Thursday) of the first slot: ``at``'s weekday and time."""
    if not at:
        return 0.0
    weekday, seconds = day_time_offset(at)
    return seconds if weekday is None else ((weekday - 3) % 7) * DAY + seconds


def slot_at_or_before(t: float, every: float, first: float) -> float:
    return math.floor((t - first) / every) * every + first


class DigestSender:
    def __init__(self, cfg: DigestConfig, outbox: Outbox, accounting: Accounting,
                 receivers: Callable[[], Sequence[ReceiverConfig]],
                 rollouts: Callable[[float, float], Sequence[Rollout]] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        """``receivers``: the configured receivers now (a reload may change their URLs and secrets);
        ``rollouts``: the rollouts judged between two times (the detector's store; none without one)."""
        self.cfg = cfg
        self.outbox = outbox
        self.accounting = accounting
        self.receivers = receivers
        self.rollouts: Callable[[float, float], Sequence[Rollout]] = rollouts or (lambda since, until: ())
        self.clock = clock
        self.first = offset(cfg.at)
        self.window = cfg.window or cfg.every
        self.sent = 0
        #: The last attempt failed (the next failures are logged at debug level until one succeeds).
        self.failing = False

    def last_slot(self) -> float | None:
        with self.outbox.transaction() as conn:
            row = conn.execute("SELECT slot FROM digest_sent WHERE name = ?", (KEY,)).fetchone()
        return None if row is None else float(row[0])

    def next_due(self) -> float:
        """The next slot to send: after the last one sent (in the past after downtime: due at once), or
        the first one after now."""
        last = self.last_slot()
        base = self.clock() if last is None else last
        return slot_at_or_before(base, self.cfg.every, self.first) + self.cfg.every

    def send(self) -> bool:
        """Queue the digest for the newest slot that has come, and record the slot; False when nothing is
        accounted yet."""
        until = self.accounting.last_time
        if until is None:
            return False
        slot = slot_at_or_before(self.clock(), self.cfg.every, self.first)
        since = until - self.window
        rollup = self.accounting.rollup(since - self.window)
        source = f"gpuwatch daemon on {socket.gethostname()} ({self.accounting.origin})"
        built = digest.build(rollup.since(since), rollup.between(since - self.window, since), since, until, source,
                             self.window, self.rollouts(since, until))
        text = digest_markdown.render(built)
        report = {**built.summary.to_dict(), "consolidation": built.consolidation.to_dict()}
        named = [r for r in self.receivers() if r.name in self.cfg.receivers]
        with self.outbox.transaction() as conn:
            for r in named:
                body = digest_body(r.kind, r.name, text, report, since, until, self.cfg.format)
                self.outbox.enqueue(conn, f"msg_{uuid.uuid4().hex}", r.name, body, time.time())
            conn.execute("INSERT OR REPLACE INTO digest_sent VALUES (?, ?)", (KEY, slot))
        self.sent += 1
        log.info("queued the digest of %s for %s", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(slot)),
                 ", ".join(r.name for r in named))
        return True

    async def run(self, wake: Callable[[], None]) -> None:
        """Send at every slot until cancelled; ``wake`` tells the deliverer a row is queued."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                due = await loop.run_in_executor(None, self.next_due)
                await asyncio.sleep(max(0.0, due - self.clock()))
                while not await loop.run_in_executor(None, self.send):
                    await asyncio.sleep(RETRY_S)
                wake()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a full disk or a damaged outbox: say so once, try again later
                log.log(logging.DEBUG if self.failing else logging.ERROR,
                        "cannot queue the digest: %s (retrying every %.0f s)", exc, RETRY_S)
                self.failing = True
                await asyncio.sleep(RETRY_S)
            else:
                if self.failing:
                    log.info("the digest is queued again")
                self.failing = False


def serve(app: App, config: Config, outbox: Outbox, accounting: Accounting | None,
          receivers: Callable[[], Sequence[ReceiverConfig]], wake: Callable[[], None],
          rollouts: Callable[[float, float], Sequence[Rollout]] | None = None) -> DigestSender | None:
    """The sender, run with ``app`` (None: ``[digest] receivers`` is empty, or no accounting to read)."""
    if not config.digest.receivers or accounting is None:
        return None
    sender = DigestSender(config.digest, outbox, accounting, receivers, rollouts)
    tasks: list[asyncio.Task[None]] = []

    async def start() -> None:
        tasks.append(asyncio.get_running_loop().create_task(sender.run(wake)))

    async def stop() -> None:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return sender
