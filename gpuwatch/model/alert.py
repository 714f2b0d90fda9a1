"""What the alert engine hands out: an :class:`Alert` (one rule firing for one label set) and a
:class:`Transition` (an alert changing state). Both are plain data so the daemon can serve them as JSON,
the notifier can queue them and the TUI can draw them without knowing the engine."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuwatch.model.severity import severity_rank

#: ``inactive`` only appears on a Transition (a pending alert whose condition went away before ``for``).
AlertState = Literal["inactive", "pending", "firing", "resolved"]
STATES: tuple[str, ...] = ("inactive", "pending", "firing", "resolved")
#: How the dashboard lists alerts: what needs a human now first.
STATE_ORDER = {"firing": 0, "pending": 1, "resolved": 2}


def fingerprint(labels: dict[str, str]) -> str:
    """Stable id of a label set: the same labels give the same id in every process and every run."""
    blob = json.dumps(sorted(labels.items()), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Alert:
    """One rule for one label set (a GPU, a process, a source).

    ``state`` is ``pending`` (condition true, waiting for ``for``), ``firing`` or ``resolved``; times are
    Unix seconds from the Snapshots, never the wall clock, so a backtest gives the same answer every run.
    ``value`` is the condition's value in the metric's unit (percent, bytes, ...), None when it has none.
    """

    name: str
    fingerprint: str
    labels: dict[str, str]
    annotations: dict[str, str]
    state: AlertState
    active_since: float | None = None
    fired_at: float | None = None
    resolved_at: float | None = None
    value: float | None = None
    #: Rule group name and ``file:line`` of the rule, for people reading an alert and wondering why.
    group: str = ""
    origin: str = field(default="", compare=False)

    def __hash__(self) -> int:  # labels and annotations are dicts: hash what identifies this alert's moment
        return hash((self.fingerprint, self.state, self.active_since, self.fired_at, self.resolved_at))

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")

    @property
    def since(self) -> float | None:
        """When the alert entered its current state (fired, became pending, resolved)."""
        return {"firing": self.fired_at, "resolved": self.resolved_at}.get(self.state, self.active_since)

    @property
    def rank_key(self) -> tuple[int, int, str]:
        """Sort key: firing, then pending, then resolved; worst severity first; then by name."""
        return (STATE_ORDER.get(self.state, len(STATE_ORDER)), severity_rank(self.severity), self.name)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fingerprint": self.fingerprint, "labels": dict(self.labels),
                "annotations": dict(self.annotations), "state": self.state, "active_since": self.active_since,
                "fired_at": self.fired_at, "resolved_at": self.resolved_at, "value": self.value,
                "group": self.group, "origin": self.origin}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Alert:
        state = str(data["state"])
        if state not in STATES:
            raise ValueError(f"unknown alert state '{state}' (one of {', '.join(STATES)})")

        def opt(key: str) -> float | None:
            v = data.get(key)
            return None if v is None else float(v)

        labels = {str(k): str(v) for k, v in dict(data.get("labels") or {}).items()}
        return cls(name=str(data["name"]), fingerprint=str(data.get("fingerprint") or fingerprint(labels)),
                   labels=labels,
                   annotations={str(k): str(v) for k, v in dict(data.get("annotations") or {}).items()},
                   state=state,  # type: ignore[arg-type]
                   active_since=opt("active_since"), fired_at=opt("fired_at"), resolved_at=opt("resolved_at"),
                   value=opt("value"), group=str(data.get("group", "")), origin=str(data.get("origin", "")))


@dataclass(frozen=True)
class Transition:
    """``alert`` (in its new state) left ``previous`` at ``time``.

    Notify on ``alert.state`` ``firing`` and ``resolved``; ``pending`` and ``inactive`` (a pending alert that
    cleared before ``for`` elapsed) are for timelines and dashboards.
    """

    alert: Alert
    previous: AlertState
    time: float

    def to_dict(self) -> dict[str, Any]:
        return {"alert": self.alert.to_dict(), "previous": self.previous, "time": self.time}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transition:
        previous = str(data["previous"])
        if previous not in STATES:
            raise ValueError(f"unknown alert state '{previous}'")
        return cls(alert=Alert.from_dict(data["alert"]), previous=previous,  # type: ignore[arg-type]
                   time=float(data["time"]))
