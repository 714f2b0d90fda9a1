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
#: Transitions kept in memory while the outbox cannot be written (one per alert; alerts are few).
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
        #: Transitions whose write failed (disk full, I/O error), latest per alert: retried every evaluation.
        self._unsaved: dict[str, Transition] = {}
        self.health = FailureTracker("storing alert transitions in the outbox", log)

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
        latest = dict(self._unsaved)
        latest.update((t.alert.fingerprint, t) for t in transitions)
        transitions, active = list(latest.values()), list(active)
        if not self._unsaved and self._quiet(transitions, active, now):
            return 0
        try:
            queued = self._store(transitions, active, now)
        except sqlite3.Error as exc:
            # Nothing was written (one transaction): keep the transitions and try again next evaluation.
            self._unsaved = dict(list(latest.items())[-MAX_UNSAVED:])
            self._next_due = float("-inf")
            self.health.failed(exc)
            return 0
        self._unsaved = {}
        self.health.succeeded()
        return queued

    def _store(self, transitions: list[Transition], active: list[Alert], now: float) -> int:
        assert self._first_time is not None
        with self.outbox.transaction() as conn:
            stored = {fp: (state, json.loads(data)) for fp, state, data in
                      conn.execute("SELECT fingerprint, state, data FROM alert_state")}
            changed: dict[str, dict[str, Any]] = {}
            for t in transitions:
                a = t.alert
                was = stored.get(a.fingerprint, ("inactive", None))[0]
                if (a.state == "firing") != (was == "firing") and a.state in ("firing", "resolved"):
                    changed[a.fingerprint] = a.to_dict()  # newly firing, or resolved after firing
            if now - self._first_time >= self.resolve_grace_s:
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
