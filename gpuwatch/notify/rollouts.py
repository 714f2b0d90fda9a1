"""A judged rollout as a notification: one alert-shaped event per rollout, in every receiver's own body.

Receivers already take alerts (gpuwatch's JSON, Alertmanager's webhook, Slack, Alertmanager's API), so a
rollout travels as an alert named ``GpuRollout`` whose labels say where and what (``gpu``, ``owner``,
``verdict``, ``hostname``) and whose annotations say the verdict in words; the generic body also carries
the whole record under ``rollout``. It goes through the outbox like every notification, so delivery
retries it, signs it where the receiver has a secret and keeps it across a restart. It is sent once, as
firing (no resolve follows: it is an event, and Alertmanager's API lets it lapse after its
resolve_timeout), and a receiver's ``match`` filters it on those labels.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Sequence
from typing import Any

from gpuwatch.config import ReceiverConfig
from gpuwatch.model.rollout import Rollout
from gpuwatch.notify.notifier import _group, _matches
from gpuwatch.notify.outbox import Outbox
from gpuwatch.notify.payloads import build_body

ALERT_NAME = "GpuRollout"


def rollout_alert(rollout: Rollout, hostname: str) -> dict[str, Any]:
    """``rollout`` as the alert dict every payload builder reads (``Alert.to_dict()``'s fields)."""
    labels = {"alertname": ALERT_NAME, "hostname": hostname, "gpu": str(rollout.gpu_index if rollout.gpu_index
                                                                           is not None else rollout.gpu),
              "uuid": rollout.gpu, "owner": rollout.owner, "verdict": rollout.verdict,
              "severity": "warning" if rollout.verdict == "worse" else "info"}
    key = f"{rollout.gpu}|{rollout.changed_at}|{rollout.after}"
    return {
        "name": ALERT_NAME, "state": "firing", "severity": labels["severity"], "labels": labels,
        "annotations": {"summary": f"rollout on GPU {labels['gpu']} ({rollout.owner}): {rollout.verdict}",
                        "description": f"{rollout.before} -> {rollout.after}. {rollout.summary}"},
        "fingerprint": hashlib.sha256(key.encode()).hexdigest()[:16],
        "active_since": rollout.changed_at, "fired_at": rollout.judged_at, "resolved_at": None,
        "value": None, "rollout": rollout.to_dict(),
    }


def enqueue_rollout(outbox: Outbox, receivers: Sequence[ReceiverConfig], rollout: Rollout, hostname: str,
                    external_url: str) -> int:
    """Queue one notification of ``rollout`` per receiver whose ``match`` takes it, in one transaction;
    returns how many were queued."""
    alert = rollout_alert(rollout, hostname)
    queued = 0
    with outbox.transaction() as conn:
        for receiver in receivers:
            if not _matches(receiver, alert["labels"]):
                continue
            key, group_labels = _group(receiver, alert["labels"])
            body = build_body(receiver.kind, receiver.name, key, group_labels, [alert], external_url)
            outbox.enqueue(conn, f"msg_{uuid.uuid4().hex}", receiver.name, body, time.time())
            queued += 1
    return queued
