"""Delivers the outbox: signed POSTs, capped exponential backoff with jitter, ``Retry-After``, dead letters.

Per receiver the oldest pending row goes first and alone, so a receiver sees firing before resolved;
receivers do not wait on each other. 2xx is delivered. 408/409/425/429, 5xx and network errors are
retried (the same ``webhook-id`` every time). Other 4xx mean the request itself is wrong: dead-lettered
at once. A row not delivered within ``max_age`` of being queued is dead-lettered.

Stopping never waits for a receiver: an attempt in flight when the daemon stops is abandoned (its row stays
pending, unchanged, and goes out with the same ``webhook-id`` after the next start), so a receiver that
accepts and never answers cannot hold the daemon past systemd's stop timeout. Each POST is the standard
library's, on a thread of its own (:mod:`gpuwatch.notify.webhook_client`).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from gpuwatch.config import NotifyConfig, ReceiverConfig
from gpuwatch.config.model import ALERTMANAGER_API
from gpuwatch.notify.alertmanager_api import post_url
from gpuwatch.notify.health import FailureTracker
from gpuwatch.notify.outbox import Outbox, OutboxRow
from gpuwatch.notify.receiver_health import ReceiverHealth
from gpuwatch.notify.signing import Secret, signed_headers
from gpuwatch.notify.webhook_client import Answer, WebhookClient, describe

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRYABLE_4XX = frozenset({408, 409, 425, 429})
#: Bytes of a receiver's response read at most: only its status counts, and a receiver that answers 200 and
#: never stops sending must not grow the daemon's memory. The rest is not read (the connection is closed).
MAX_RESPONSE_BYTES = 64 * 1024
PRUNE_EVERY_S = 3600.0
#: With nothing due, how long the loop sleeps before looking at the outbox again. Every new row wakes it
#: (``wake``), so this is only a safety net: one outbox query a minute costs nothing; one every 5 s was
#: a visible share of an idle daemon's CPU.
IDLE_LOOK_S = 60.0


@dataclass(frozen=True)
class Target:
    config: ReceiverConfig
    #: None for receivers that check no signature (Slack without one, Alertmanager's API).
    secret: Secret | None

    def request(self, webhook_id: str, now: float, body: bytes) -> tuple[str, dict[str, str]]:
        """URL and headers of one attempt: signed when there is a secret (a fresh timestamp each time)."""
        url = post_url(self.config.url) if self.config.kind == ALERTMANAGER_API else self.config.url
        if self.secret is None:
            return url, {"webhook-id": webhook_id, "content-type": "application/json"}
        return url, signed_headers(self.secret, webhook_id, int(now), body)


def retry_after_s(value: str | None, now: float) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def backoff_s(attempts: int, cfg: NotifyConfig, rand: Callable[[], float] = random.random) -> float:
    """Capped exponential backoff with "equal jitter": between half and all of the capped delay."""
    capped = min(cfg.max_backoff, cfg.initial_backoff * (2 ** min(attempts, 30)))
    return capped / 2 + rand() * capped / 2


class Deliverer:
    def __init__(self, outbox: Outbox, targets: Mapping[str, Target], cfg: NotifyConfig,
                 clock: Callable[[], float] = time.time) -> None:
        self.outbox = outbox
        self.targets = dict(targets)
        self.cfg = cfg
        self.clock = clock
        self.wake = asyncio.Event()
        self.failed_attempts = 0
        self.health = FailureTracker("delivering notifications from the outbox", log)
        self.receivers = ReceiverHealth(cfg.unhealthy_after)
        #: Responses not read to their end because they were longer than MAX_RESPONSE_BYTES.
        self.responses_cut = 0
        self._cut_responses: set[str] = set()

    def set_config(self, cfg: NotifyConfig) -> None:
        """New timeouts and back-off (a reload); attempts already waiting keep their time."""
        self.cfg = cfg
        self.receivers.unhealthy_after_s = cfg.unhealthy_after

    def health_report(self) -> dict[str, Any]:
        """/healthz's ``delivery``: reading the outbox (``outbox``) and each receiver's results; ``ok`` is
        False when either fails (a receiver failing longer than ``[notify] unhealthy_after``)."""
        try:
            oldest = self.outbox.oldest_pending()
        except sqlite3.Error:  # the outbox health says why
            oldest = {}
        report = self.receivers.report(self.targets, oldest, self.clock())
        return {**report, "ok": report["ok"] and self.health.healthy, "outbox": self.health.to_dict()}

    def set_targets(self, targets: Mapping[str, Target]) -> None:
        """New receivers and secrets (a reload); notifications already queued for a removed one wait."""
        self.targets = dict(targets)

    def _note_cut(self, answer: Answer, receiver: str) -> None:
        """A response longer than MAX_RESPONSE_BYTES was not read to its end: say so once per receiver."""
        if not answer.cut:
            return
        if receiver not in self._cut_responses:
            self._cut_responses.add(receiver)
            log.warning("receiver %s sent a response of more than %d KiB (HTTP %d); not read further (its "
                        "status counts)", receiver, MAX_RESPONSE_BYTES // 1024, answer.status)
        self.responses_cut += 1

    async def _attempt(self, client: WebhookClient, row: OutboxRow, target: Target) -> None:
        now = self.clock()
        if now - row.created > self.cfg.max_age:
            self.outbox.mark_dead(row.id, now, f"not delivered within max_age {self.cfg.max_age:g} s")
            log.warning("notification %s to %s dead-lettered: older than max_age", row.webhook_id, row.receiver)
            return
        url, headers = target.request(row.webhook_id, now, row.body)
        status, retry_after, error = 0, None, ""
        try:
            # Never follows a redirect: the signed headers would go to wherever it points.
            answer = await client.post(url, row.body, headers, self.cfg.timeout, MAX_RESPONSE_BYTES)
            status, retry_after = answer.status, retry_after_s(answer.retry_after, now)
            self._note_cut(answer, row.receiver)
        except (asyncio.TimeoutError, OSError, ValueError) as exc:  # URLError is an OSError; a bad URL a ValueError
            error = describe(exc)
        now = self.clock()
        if 200 <= status < 300:
            self.outbox.mark_delivered(row.id, now)
            self.receivers.succeeded(row.receiver, now)
            return
        error = error or f"HTTP {status}"
        self.receivers.failed(row.receiver, now, error)
        if 300 <= status < 400:
            error += " (a redirect; it is not followed: configure the final URL)"
        if 300 <= status < 500 and status not in RETRYABLE_4XX:
            self.outbox.mark_dead(row.id, now, error)
            log.warning("notification %s to %s dead-lettered: %s", row.webhook_id, row.receiver, error)
            return
        self.failed_attempts += 1
        delay = backoff_s(row.attempts, self.cfg)
        if retry_after is not None:
            delay = min(max(retry_after, 0.0), self.cfg.max_backoff)
        self.outbox.mark_retry(row.id, now + delay, error)
        log.info("notification %s to %s failed (%s); retry in %.1f s", row.webhook_id, row.receiver, error, delay)

    async def deliver_due(self, client: WebhookClient, ignore_backoff: bool = False) -> int:
        """One attempt at each receiver's oldest pending row that is due; returns rows handled."""
        now = self.clock()
        jobs, expired = [], 0
        for row in self.outbox.heads():
            target = self.targets.get(row.receiver)
            if target is None:  # a receiver removed from the config: its rows wait for it up to max_age
                if now - row.created > self.cfg.max_age:
                    self.outbox.mark_dead(row.id, now, "its receiver is no longer in the config")
                    log.warning("notification %s dead-lettered: receiver %s is no longer configured",
                                row.webhook_id, row.receiver)
                    expired += 1
                continue
            if ignore_backoff or row.next_attempt <= now:
                jobs.append(self._attempt(client, row, target))
        if jobs:
            await asyncio.gather(*jobs)
        return len(jobs) + expired

    def next_due_in(self) -> float:
        heads = [r for r in self.outbox.heads() if r.receiver in self.targets]
        if not heads:
            return IDLE_LOOK_S
        return max(0.0, min(r.next_attempt for r in heads) - self.clock())

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set; woken early by :attr:`wake` when rows are queued."""
        last_prune = float("-inf")
        client = WebhookClient()
        while not stop.is_set():
            if self.clock() - last_prune >= PRUNE_EVERY_S:  # delivered/dead rows older than a week go
                self.outbox.prune(self.clock())
                last_prune = self.clock()
            try:
                while await until_stopped(self.deliver_due(client), stop):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                wait = min(self.next_due_in(), IDLE_LOOK_S)
            except Exception as exc:  # the outbox cannot be read or written (disk, damage), or a bug
                self.health.failed(exc, with_traceback=not isinstance(exc, sqlite3.Error))
                wait = 1.0
            else:
                self.health.succeeded()
            self.wake.clear()
            waiters = [asyncio.ensure_future(self.wake.wait()), asyncio.ensure_future(stop.wait())]
            await asyncio.wait(waiters, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()

    async def flush(self, timeout_s: float) -> int:
        """At shutdown: one more try for every pending head, without waiting for backoff; returns rows left."""
        deadline = self.clock() + timeout_s
        client = WebhookClient()
        while self.clock() < deadline:
            before = sum(n for (_, s), n in self.outbox.counts().items() if s == "pending")
            try:
                await asyncio.wait_for(self.deliver_due(client, ignore_backoff=True),
                                       max(0.1, deadline - self.clock()))
            except asyncio.TimeoutError:
                break
            after = sum(n for (_, s), n in self.outbox.counts().items() if s == "pending")
            if after == 0 or after >= before:
                break
        return sum(n for (_, s), n in self.outbox.counts().items() if s == "pending")


async def until_stopped(work: Awaitable[T], stop: asyncio.Event) -> T | None:
    """``work``'s result, or None once ``stop`` is set first: then ``work`` is cancelled. An attempt cancelled
    mid-request marks nothing, so its row stays pending and keeps its id for the next start."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task
    return None
