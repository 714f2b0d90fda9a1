"""The alerts pane: firing, pending and recently resolved alerts with their age.

Ages are measured against the newest snapshot's time, never the wall clock, so a replayed incident
reads the same as it did live and screenshots are reproducible. Alerts arrive as ``Alert`` objects
(in-process engine) or their ``to_dict()`` form (from a daemon); both read the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from gpuwatch.tui.analysis import field
from gpuwatch.tui.format import age

STATE_ORDER = {"firing": 0, "pending": 1, "resolved": 2}
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def _since(alert: Any) -> float | None:
    state = field(alert, "state")
    key = {"firing": "fired_at", "pending": "active_since", "resolved": "resolved_at"}.get(state, "active_since")
    value = field(alert, key)
    return None if value is None else float(value)


def render_alerts(alerts: Sequence[Any] | None, now: float | None, note: str, styles: dict[str, str],
                  source_names: dict[int, str] | None = None) -> Text:
    """One line per alert: state, severity, name, where (host/gpu/pid), summary, age."""
    if alerts is None:
        return Text(note or "no alert engine", style="dim")
    if not alerts:
        return Text("no alerts: every rule is quiet", style=styles.get("ok", ""))
    rows = sorted(alerts, key=lambda a: (STATE_ORDER.get(field(a, "state"), 3),
                                         SEVERITY_ORDER.get(field(a, "labels", {}).get("severity", ""), 3),
                                         str(field(a, "name"))))
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, a in enumerate(rows):
        if i:
            out.append("\n")
        state = str(field(a, "state"))
        labels: dict[str, str] = field(a, "labels", {}) or {}
        severity = labels.get("severity", "")
        badge = {"firing": styles.get("error", "red"), "pending": styles.get("warning", "yellow")}.get(state, "dim")
        out.append(f" {state.upper():8} ", style=f"bold reverse {badge}" if state != "resolved" else "dim")
        since = _since(a)
        when = age(None if since is None or now is None else now - since)
        out.append(f" {when:>6} ", style="dim")
        out.append(str(field(a, "name")), style="bold" if state != "resolved" else "dim")
        where = [f"{k}={labels[k]}" for k in ("host", "gpu", "pid") if labels.get(k)]
        if where:
            out.append(" " + " ".join(where), style="dim")
        if severity:
            out.append(f" [{severity}]", style=badge if state != "resolved" else "dim")
        summary = (field(a, "annotations", {}) or {}).get("summary")
        if summary:
            out.append("  " + summary)
    return out


class AlertsPane(VerticalScroll):
    """Scrollable list of alerts; redraws only when its text changes."""

    DEFAULT_CSS = """
    AlertsPane { height: 1fr; }
    AlertsPane > Static { width: 100%; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(Static("waiting for alerts…", classes="body"), id=id)
        self.border_title = "Alerts"
        self._shown: str | None = None
        self.counts: dict[str, int] = {}

    def show(self, alerts: Sequence[Any] | None, now: float | None, note: str = "") -> None:
        theme = self.app.current_theme
        styles = {"ok": theme.success or "green", "warning": theme.warning or "yellow",
                  "error": theme.error or "red"}
        text = render_alerts(alerts, now, note, styles)
        marker = text.markup
        self.counts = {s: sum(1 for a in alerts or () if field(a, "state") == s) for s in STATE_ORDER}
        firing, pending = self.counts["firing"], self.counts["pending"]
        self.border_title = f"Alerts {firing} firing · {pending} pending" if alerts else "Alerts"
        if marker != self._shown:
            self._shown = marker
            self.query_one(Static).update(text)
