"""Request bodies per receiver kind, built from alert dicts (``Alert.to_dict()``).

* ``generic``: gpuwatch's own JSON (every alert field, plus group and status);
* ``alertmanager``: Alertmanager's webhook v4 body, so receivers written for Alertmanager work unchanged;
* ``slack``: an incoming-webhook message (``text`` plus one attachment per alert);
* ``alertmanager_api``: the list of alerts Alertmanager's own ``POST /api/v2/alerts`` takes (see
  :mod:`gpuwatch.notify.alertmanager_api`).

The scheduled digest (:func:`digest_body`) goes to ``generic`` receivers as gpuwatch's JSON with
``"kind": "digest"`` and to ``slack`` ones as a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

ZERO_TIME = "0001-01-01T00:00:00Z"


def rfc3339(t: float | None) -> str:
    if t is None:
        return ZERO_TIME
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _common(dicts: Sequence[Mapping[str, str]]) -> dict[str, str]:
    if not dicts:
        return {}
    first = dict(dicts[0])
    return {k: v for k, v in first.items() if all(d.get(k) == v for d in dicts[1:])}


def _status(alerts: Sequence[Mapping[str, Any]]) -> str:
    return "firing" if any(a["state"] == "firing" for a in alerts) else "resolved"


def generic(receiver: str, group_key: str, group_labels: Mapping[str, str], alerts: Sequence[Mapping[str, Any]],
            external_url: str) -> dict[str, Any]:
    return {"version": "1", "receiver": receiver, "status": _status(alerts), "group_key": group_key,
            "group_labels": dict(group_labels), "external_url": external_url, "alerts": [dict(a) for a in alerts]}


def alertmanager(receiver: str, group_key: str, group_labels: Mapping[str, str],
                 alerts: Sequence[Mapping[str, Any]], external_url: str) -> dict[str, Any]:
    items = [{
        "status": "firing" if a["state"] == "firing" else "resolved",
        "labels": dict(a["labels"]), "annotations": dict(a["annotations"]),
        "startsAt": rfc3339(a.get("fired_at") or a.get("active_since")),
        "endsAt": rfc3339(a.get("resolved_at")) if a["state"] == "resolved" else ZERO_TIME,
        "generatorURL": f"{external_url}/api/v1/alerts", "fingerprint": a["fingerprint"],
    } for a in alerts]
    return {"version": "4", "groupKey": group_key, "truncatedAlerts": 0, "status": _status(alerts),
            "receiver": receiver, "groupLabels": dict(group_labels),
            "commonLabels": _common([a["labels"] for a in alerts]),
            "commonAnnotations": _common([a["annotations"] for a in alerts]),
            "externalURL": external_url, "alerts": items}


def slack(receiver: str, group_key: str, group_labels: Mapping[str, str], alerts: Sequence[Mapping[str, Any]],
          external_url: str) -> dict[str, Any]:
    status = _status(alerts)
    firing = sum(1 for a in alerts if a["state"] == "firing")
    title = ", ".join(f"{k}={v}" for k, v in group_labels.items()) or receiver
    attachments = []
    for a in alerts:
        labels = a["labels"]
        where = " ".join(f"{k}={labels[k]}" for k in ("hostname", "gpu", "pid") if k in labels)
        attachments.append({
            "color": "danger" if a["state"] == "firing" else "good",
            "title": f"[{a['state'].upper()}] {a['name']} {where}".strip(),
            "text": a["annotations"].get("description") or a["annotations"].get("summary", ""),
        })
    head = f"[{status.upper()}{':' + str(firing) if firing else ''}] {title}"
    return {"text": f"{head} (<{external_url}/api/v1/alerts|gpuwatch>)", "attachments": attachments}


def alertmanager_api(receiver: str, group_key: str, group_labels: Mapping[str, str],
                     alerts: Sequence[Mapping[str, Any]], external_url: str) -> list[dict[str, Any]]:
    """Alertmanager's ``postableAlerts``: a firing alert goes without ``endsAt`` (Alertmanager keeps it for
    its resolve_timeout after each send), a resolved one with ``endsAt`` = when it resolved, which ends it.
    Empty label values are left out, as Prometheus leaves them out (an empty label is no label)."""
    items = []
    for a in alerts:
        item: dict[str, Any] = {
            "labels": {str(k): str(v) for k, v in a["labels"].items() if str(v)},
            "annotations": {str(k): str(v) for k, v in a["annotations"].items() if str(v)},
            "startsAt": rfc3339(a.get("fired_at") or a.get("active_since")),
            "generatorURL": f"{external_url}/api/v1/alerts",
        }
        if a["state"] == "resolved":
            item["endsAt"] = rfc3339(a.get("resolved_at"))
        items.append(item)
    return items


BUILDERS: dict[str, Callable[..., Any]] = {"generic": generic, "alertmanager": alertmanager, "slack": slack,
                                           "alertmanager_api": alertmanager_api}


def build_body(kind: str, receiver: str, group_key: str, group_labels: Mapping[str, str],
               alerts: Sequence[Mapping[str, Any]], external_url: str) -> bytes:
    doc = BUILDERS[kind](receiver, group_key, group_labels, alerts, external_url)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def digest_body(kind: str, receiver: str, markdown: str, report: Mapping[str, Any], since: float, until: float,
                fmt: str) -> bytes:
    """The digest for one receiver: Slack gets the Markdown as its message; a generic receiver gets it as
    ``text`` (``fmt`` markdown) or the report's JSON as ``report`` (``fmt`` json), with the window."""
    if kind == "slack":
        doc: dict[str, Any] = {"text": markdown}
    else:
        doc = {"version": "1", "kind": "digest", "receiver": receiver, "since": rfc3339(since),
               "until": rfc3339(until), "format": fmt}
        doc.update({"text": markdown} if fmt == "markdown" else {"report": dict(report)})
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
