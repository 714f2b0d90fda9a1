"""The alerts pane: firing, pending and recently resolved alerts with their age.

Ages are measured against the newest snapshot's time, never the wall clock, so a replayed incident
reads the same as it did live and screenshots are reproducible. Alerts arrive as ``Alert`` objects, from
the in-process engine or decoded from a daemon's JSON. One row per alert in a :class:`RowTable`: as ages
tick, only those rows are repainted.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from gpuwatch.model.alert import STATE_ORDER, Alert
from gpuwatch.tui.format import age
from gpuwatch.tui.widgets.row_table import Col, RowTable

COLUMNS = (Col("state", "STATE", 10), Col("age", "FOR", 6, right=True), Col("name", "ALERT", 24),
           Col("where", "WHERE", 12), Col("severity", "SEVERITY", 8), Col("summary", "SUMMARY", 120))


def ordered(alerts: Sequence[Alert]) -> list[Alert]:
    """Firing first, then pending, then resolved; worst severity first; then by name."""
    return sorted(alerts, key=lambda a: a.rank_key)


def alert_cells(a: Alert, now: float | None, styles: dict[str, str]) -> tuple[Text | str, ...]:
    colour = {"firing": styles["error"], "pending": styles["warning"]}.get(a.state, "dim")
    badge = Text(f" {a.state.upper()} ", style=f"bold reverse {colour}" if a.state != "resolved" else "dim")
    when = age(None if a.since is None or now is None else now - a.since)
    where = " ".join(f"{k}={a.labels[k]}" for k in ("host", "gpu", "pid") if a.labels.get(k))
    dim = "dim" if a.state == "resolved" else ""
    return (badge, Text(when, style="dim"), Text(a.name, style=dim or "bold"), Text(where, style="dim"),
            Text(a.severity, style=dim or colour), Text(a.annotations.get("summary", ""), style=dim))


class AlertsPane(RowTable):
    """Alerts of the selected source, one row each."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Alerts"
        self.empty_text = Text("waiting for alerts…", style="dim")
        self.counts: dict[str, int] = {}

    def on_mount(self) -> None:
        self.set_columns(COLUMNS)

    def show(self, alerts: Sequence[Alert] | None, now: float | None, note: str = "") -> None:
        theme = self.app.current_theme
        styles = {"warning": theme.warning or "yellow", "error": theme.error or "red"}
        if alerts is None:
            self.empty_text = Text(note or "no alert engine", style="dim")
        else:
            self.empty_text = Text("no alerts: every rule is quiet", style=theme.success or "green")
        rows = {a.fingerprint or str(i): alert_cells(a, now, styles)
                for i, a in enumerate(ordered(alerts or ()))}
        self.counts = {s: sum(1 for a in alerts or () if a.state == s) for s in STATE_ORDER}
        title = f"Alerts {self.counts['firing']} firing · {self.counts['pending']} pending" if alerts else "Alerts"
        if title != self.border_title:
            self.border_title = title
        self.set_rows(list(rows), rows)
