"""Turns alert transitions into queued notifications: which receivers, which groups, firing or resolved,
and when a still-firing group is due again (``repeat_interval``; an Alertmanager receiver every minute).

A notification is one request for one group of one receiver: the group's firing alerts plus those that
resolved in this evaluation (Alertmanager's model, so its receivers understand it). Times here are
Snapshot times, like the alert engine's, so a replay behaves as the live run did; the outbox's delivery
times are wall-clock.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuwatch.config import ReceiverConfig
from gpuwatch.config.model import ALERTMANAGER_API
from gpuwatch.model.alert import Alert, Transition
from gpuwatch.notify.health import FailureTracker
from gpuwatch.notify.outbox import Outbox
from gpuwatch.notify.payloads import build_body

log = logging.getLogger(__name__)
#: Transitions kept in memory while the outbox cannot be written, every one in order (an alert that fires
#: and resolves while the disk is full owes both notifications); past this the oldest go, counted and logged.
MAX_UNSAVED = 10_000


def _matches(receiver: ReceiverConfig, labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in receiver.match.items())


def _group(receiver: ReceiverConfig, labels: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    group_labels = {k: labels.get(k, "") for k in receiver.group_by}
    key = "{}:{}".format(receiver.name, json.dumps(sorted(group_labels.items()), separators=(",", ":")))
    return key, group_labels


class Notifier:
    """Stateful across evaluations only through the database, so a restart picks up where it stopped."""

    def __init__(self, outbox: Outbox, receivers: Sequence[ReceiverConfig], external_url: str,
                 resolve_grace_s: float = 300.0) -> None:
        self.outbox = outbox
        self.receivers = list(receivers)
        self.external_url = external_url
        self.resolve_grace_s = resolve_grace_s
        self._first_time: float | None = None
        # In-memory mirror of the database, so the common tick (nothing changed, nothing due) costs no I/O.
        self._firing: set[str] | None = None
        self._next_due = float("-inf")
        #: Evaluations whose write failed (disk full, I/O error): (time, transitions), oldest first, each
        #: replayed in order by the next write that succeeds.
        self._unsaved: list[tuple[float, list[Transition]]] = []
        #: Transitions dropped because more than MAX_UNSAVED waited (the disk was full for that long).
        self.unsaved_dropped = 0
        self.health = FailureTracker("storing alert transitions in the outbox", log)

    def health_report(self) -> dict[str, Any]:
        """/healthz's ``notifier``: outbox writes, and transitions waiting in memory or dropped meanwhile."""
        return {**self.health.to_dict(), "unsaved_transitions": self.unsaved, "unsaved_dropped": self.unsaved_dropped}

    @property
    def unsaved(self) -> int:
        """Transitions waiting in memory for the outbox to take writes again."""
        return sum(len(ts) for _, ts in self._unsaved)

    def set_receivers(self, receivers: Sequence[ReceiverConfig]) -> None:
        """New receivers (a reload): the next evaluation re-checks every group against them."""
        self.receivers = list(receivers)
        self._next_due = float("-inf")

    def _quiet(self, transitions: list[Transition], active: list[Alert], now: float) -> bool:
        """True when this evaluation can change nothing: no transition, no repeat due, no orphan to resolve."""
        if self._firing is None or now >= self._next_due:
            return False
        if any(t.alert.state in ("firing", "resolved") for t in transitions):
            return False
        if self._firing and self._first_time is not None and now - self._first_time >= self.resolve_grace_s:
            live = {a.fingerprint for a in active if a.state in ("pending", "firing")}
            return self._firing <= live
        return True

    def handle(self, transitions: Iterable[Transition], active: Iterable[Alert], now: float) -> int:
        """Record firing/resolved changes and queue what they cause, in one transaction; returns rows queued."""
        if self._first_time is None:
            self._first_time = now
        transitions, active = list(transitions), list(active)
        # After a failed write every evaluation writes again (a probe at least): health must come back
        # only when the disk takes writes, not on a quiet tick that wrote nothing.
        if not self._unsaved and not self.health.consecutive and self._quiet(transitions, active, now):
            return 0
        batches = [*self._unsaved, (now, transitions)]
        try:
            queued = self._store(batches, active)
        except sqlite3.Error as exc:
            # Nothing was written (one transaction): keep every transition and try again next evaluation.
            self._keep_unsaved(batches)
            self._next_due = float("-inf")
            self.health.failed(exc)
            return 0
        self._unsaved = []
        return queued

    def _keep_unsaved(self, batches: list[tuple[float, list[Transition]]]) -> None:
        batches = [(t, ts) for t, ts in batches if ts]
        total = sum(len(ts) for _, ts in batches)
        while total > MAX_UNSAVED and batches:
            _, oldest = batches.pop(0)
            total -= len(oldest)
            self.unsaved_dropped += len(oldest)
            log.error("the outbox has not taken a write for a long time: dropped %d unsaved alert transition(s) "
                      "(%d so far); their notifications are lost", len(oldest), self.unsaved_dropped)
        self._unsaved = batches

    def _store(self, batches: list[tuple[float, list[Transition]]], active: list[Alert]) -> int:
        """Every evaluation's transitions in order, in one transaction. Health comes back only with a write
        that stored rows: an empty transaction succeeds on a full disk too, so then a probe row is written."""
        queued = 0
        with self.outbox.transaction() as conn:
            before = conn.total_changes
            for i, (now, transitions) in enumerate(batches):
                queued += self._apply(conn, transitions, active if i == len(batches) - 1 else None, now)
            if self.health.consecutive and conn.total_changes == before:
                self.outbox.probe(conn, batches[-1][0])
        self.health.succeeded()
        return queued

    def _apply(self, conn: sqlite3.Connection, transitions: list[Transition], active: list[Alert] | None,
               now: float) -> int:
        """One evaluation: store firing/resolved changes and queue what they cause (``active`` None: an
        evaluation replayed after a failed write, whose orphans the latest one judges)."""
        assert self._first_time is not None
        stored = {fp: (state, json.loads(data)) for fp, state, data in
                  conn.execute("SELECT fingerprint, state, data FROM alert_state")}
        changed: dict[str, dict[str, Any]] = {}
        for t in transitions:
            a = t.alert
            was = changed[a.fingerprint]["state"] if a.fingerprint in changed else \
                stored.get(a.fingerprint, ("inactive", None))[0]
            if (a.state == "firing") != (was == "firing") and a.state in ("firing", "resolved"):
                changed[a.fingerprint] = a.to_dict()  # newly firing, or resolved after firing
        if active is not None and now - self._first_time >= self.resolve_grace_s:
            changed.update(self._orphans(stored, active, changed, now))
        for fp, data in changed.items():
            conn.execute("INSERT OR REPLACE INTO alert_state VALUES (?,?,?,?)",
                         (fp, data["state"], json.dumps(data), now))
            stored[fp] = (data["state"], data)
        queued = self._queue(conn, stored, changed, now)
        conn.execute("DELETE FROM alert_state WHERE state != 'firing'")
        self._firing = {fp for fp, (state, _) in stored.items() if state == "firing"}
        return queued

    def _orphans(self, stored: Mapping[str, tuple[str, Any]], active: Iterable[Alert],
                 changed: Mapping[str, Any], now: float) -> dict[str, dict[str, Any]]:
        """Alerts stored as firing (before a restart) that the engine no longer has: resolve them."""
        live = {a.fingerprint for a in active if a.state in ("pending", "firing")}
        out = {}
        for fp, (state, data) in stored.items():
            if state == "firing" and fp not in live and fp not in changed:
                out[fp] = {**data, "state": "resolved", "resolved_at": now}
        return out

    def _groups(self, receiver: ReceiverConfig, stored: Mapping[str, tuple[str, Any]],
                changed: Mapping[str, Any]) -> dict[str, tuple[dict[str, str], list[dict[str, Any]], bool]]:
        """group key -> (group labels, member alerts, changed in this evaluation) for one receiver."""
        groups: dict[str, tuple[dict[str, str], list[dict[str, Any]], bool]] = {}
        for fp, (state, data) in stored.items():
            if not _matches(receiver, data["labels"]):
                continue
            if state == "resolved" and (fp not in changed or not receiver.send_resolved):
                continue
            key, labels = _group(receiver, data["labels"])
            _, members, dirty = groups.setdefault(key, (labels, [], False))
            groups[key] = (labels, [*members, data], dirty or fp in changed)
        return groups

    @staticmethod
    def _has_pending(conn: sqlite3.Connection, receiver: str) -> bool:
        return conn.execute("SELECT 1 FROM outbox WHERE status='pending' AND receiver=? LIMIT 1",
                            (receiver,)).fetchone() is not None

    def _queue(self, conn: sqlite3.Connection, stored: Mapping[str, tuple[str, Any]],
               changed: Mapping[str, Any], now: float) -> int:
        queued = 0
        self._next_due = float("inf")
        last_sent = {(r, k): t for r, k, t in conn.execute("SELECT receiver, group_key, last_sent FROM groups")}
        for receiver in self.receivers:
            firing_keys = set()
            for key, (labels, members, dirty) in self._groups(receiver, stored, changed).items():
                firing = any(m["state"] == "firing" for m in members)
                sent = last_sent.get((receiver.name, key))
                # A firing group never sent (a receiver added by a reload) is due at once.
                due = firing and (sent is None or now - sent >= receiver.resend_s)
                if firing:
                    firing_keys.add(key)
                if not (dirty or due):
                    continue
                if not dirty and receiver.kind == ALERTMANAGER_API and self._has_pending(conn, receiver.name):
                    # Alertmanager is not taking requests: the one waiting says the same, and the next re-send
                    # follows it within the interval (a backlog of re-sends would only delay the recovery).
                    conn.execute("INSERT OR REPLACE INTO groups VALUES (?,?,?)", (receiver.name, key, now))
                    last_sent[(receiver.name, key)] = now
                    continue
                members.sort(key=lambda m: (m["state"] != "firing", m["name"], m["fingerprint"]))
                body = build_body(receiver.kind, receiver.name, key, labels, members, self.external_url)
                self.outbox.enqueue(conn, f"msg_{uuid.uuid4().hex}", receiver.name, body, time.time())
                conn.execute("INSERT OR REPLACE INTO groups VALUES (?,?,?)", (receiver.name, key, now))
                last_sent[(receiver.name, key)] = now
                queued += 1
            for r, k in list(last_sent):
                if r != receiver.name:
                    continue
                if k in firing_keys:
                    self._next_due = min(self._next_due, last_sent[(r, k)] + receiver.resend_s)
                else:
                    conn.execute("DELETE FROM groups WHERE receiver=? AND group_key=?", (r, k))
        if queued:
            log.info("queued %d notification(s)", queued)
        return queued
