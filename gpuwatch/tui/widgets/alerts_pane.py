"""The alerts pane: firing, pending and recently resolved alerts with their age.

Ages are measured against the newest snapshot's time, never the wall clock, so a replayed incident
reads the same as it did live and screenshots are reproducible. Alerts arrive as ``Alert`` objects
(in-process engine) or their ``to_dict()`` form (from a daemon); both read the same way. One row per
alert in a :class:`RowTable`: as ages tick, only those rows are repainted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from gpuwatch.tui.analysis import field
from gpuwatch.tui.format import age
from gpuwatch.tui.widgets.row_table import Col, RowTable

STATE_ORDER = {"firing": 0, "pending": 1, "resolved": 2}
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
COLUMNS = (Col("state", "STATE", 10), Col("age", "FOR", 6, right=True), Col("name", "ALERT", 24),
           Col("where", "WHERE", 12), Col("severity", "SEVERITY", 8), Col("summary", "SUMMARY", 120))


def _since(alert: Any) -> float | None:
    state = field(alert, "state")
    key = {"firing": "fired_at", "pending": "active_since", "resolved": "resolved_at"}.get(state, "active_since")
    value = field(alert, key)
    return None if value is None else float(value)


def ordered(alerts: Sequence[Any]) -> list[Any]:
    """Firing first, then pending, then resolved; worst severity first; then by name."""
    return sorted(alerts, key=lambda a: (STATE_ORDER.get(field(a, "state"), 3),
                                         SEVERITY_ORDER.get((field(a, "labels", {}) or {}).get("severity", ""), 3),
                                         str(field(a, "name"))))


def alert_cells(a: Any, now: float | None, styles: dict[str, str]) -> tuple[Text | str, ...]:
    state = str(field(a, "state"))
    labels: dict[str, str] = field(a, "labels", {}) or {}
    colour = {"firing": styles["error"], "pending": styles["warning"]}.get(state, "dim")
    badge = Text(f" {state.upper()} ", style=f"bold reverse {colour}" if state != "resolved" else "dim")
    since = _since(a)
    when = age(None if since is None or now is None else now - since)
    where = " ".join(f"{k}={labels[k]}" for k in ("host", "gpu", "pid") if labels.get(k))
    dim = "dim" if state == "resolved" else ""
    return (badge, Text(when, style="dim"), Text(str(field(a, "name")), style=dim or "bold"), Text(where, style="dim"),
            Text(labels.get("severity", ""), style=dim or colour),
            Text((field(a, "annotations", {}) or {}).get("summary", ""), style=dim))


class AlertsPane(RowTable):
    """Alerts of the selected source, one row each."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Alerts"
        self.empty_text = Text("waiting for alerts…", style="dim")
        self.counts: dict[str, int] = {}

    def on_mount(self) -> None:
        self.set_columns(COLUMNS)

    def show(self, alerts: Sequence[Any] | None, now: float | None, note: str = "") -> None:
        theme = self.app.current_theme
        styles = {"warning": theme.warning or "yellow", "error": theme.error or "red"}
        if alerts is None:
            self.empty_text = Text(note or "no alert engine", style="dim")
        else:
            self.empty_text = Text("no alerts: every rule is quiet", style=theme.success or "green")
        rows = {str(field(a, "fingerprint") or i): alert_cells(a, now, styles)
                for i, a in enumerate(ordered(alerts or ()))}
        self.counts = {s: sum(1 for a in alerts or () if field(a, "state") == s) for s in STATE_ORDER}
        title = f"Alerts {self.counts['firing']} firing · {self.counts['pending']} pending" if alerts else "Alerts"
        if title != self.border_title:
            self.border_title = title
        self.set_rows(list(rows), rows)
