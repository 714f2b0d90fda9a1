"""The alerts pane: firing, pending and recently resolved alerts with their age.

Ages are measured against the newest snapshot's time, never the wall clock, so a replayed incident
reads the same as it did live and screenshots are reproducible. Alerts arrive as ``Alert`` objects, from
the in-process engine or decoded from a daemon's JSON. One row per alert in a :class:`RowTable`: as ages
tick, only those rows are repainted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from gpuwatch.doctor.groups import id_list, merge_numbers, skeleton
from gpuwatch.model.alert import STATE_ORDER, Alert
from gpuwatch.tui.format import age_steps
from gpuwatch.tui.widgets.row_table import Col, RowTable

#: Below this many cells the pane drops FOR and SEVERITY and shows the state as one letter, so that alert
#: names, GPUs and pids are whole at 80x24 (the pane is ~36 cells wide there).
WIDE = 70
SUMMARY_W = 120
STATE_LETTER = {"firing": "F", "pending": "P", "resolved": "R"}


def ordered(alerts: Sequence[Alert]) -> list[Alert]:
    """Firing first, then pending, then resolved; worst severity first; then by name."""
    return sorted(alerts, key=lambda a: a.rank_key)


@dataclass(frozen=True)
class AlertRow:
    """One alert, or the same alert on several GPUs said once (GPUs ``0, 2, 3``): same rule, state,
    severity and host, and a summary that differs only in its numbers."""

    alerts: tuple[Alert, ...]

    @property
    def lead(self) -> Alert:
        return self.alerts[0]

    @property
    def key(self) -> str:
        return "+".join(a.fingerprint for a in self.alerts)

    def gpus(self) -> str:
        ids = sorted({int(g) for a in self.alerts if (g := a.labels.get("gpu", "")).isdigit()})
        return ", ".join(str(i) for i in ids) if ids else ""

    def pids(self) -> str:
        ids = sorted({int(p) for a in self.alerts if (p := a.labels.get("pid", "")).isdigit()})
        return ", ".join(str(i) for i in ids)

    def summary(self) -> str:
        return merge_numbers([a.annotations.get("summary", "") for a in self.alerts])

    def oldest(self) -> float | None:
        sinces = [a.since for a in self.alerts if a.since is not None]
        return min(sinces) if sinces else None


def group_alerts(alerts: Sequence[Alert]) -> list[AlertRow]:
    """Rows in :func:`ordered` order; alerts that differ only in their GPU (and the numbers that go with
    it) share one row. Process alerts group too (one pid per GPU): their pids are listed."""
    groups: dict[tuple[str, ...], list[Alert]] = {}
    for a in ordered(alerts):
        key = (a.name, a.state, a.severity, a.labels.get("host", ""), a.labels.get("hostname", ""),
               a.labels.get("source", ""), skeleton(a.annotations.get("summary", "")))
        groups.setdefault(key, []).append(a)
    return [AlertRow(tuple(members)) for members in groups.values()]


def where_text(row: AlertRow, wide: bool = True) -> str:
    """``GPU 0 pid 558``, ``GPUs 0, 2, 3``; a daemon's host first when the alert names one. Narrow: under
    a ``GPU/PID`` header, ``0/558``, ``0,2,3``."""
    gpus = [int(g) for g in row.gpus().split(", ") if g]
    pids = [int(p) for p in row.pids().split(", ") if p]
    if not wide:
        text = ",".join(map(str, gpus)) + ("/" + ",".join(map(str, pids)) if pids else "")
        return f"{row.lead.labels['host']}:{text}" if row.lead.labels.get("host") else text
    parts = [*([row.lead.labels["host"]] if row.lead.labels.get("host") else []),
             *([id_list("GPU", gpus)] if gpus else []), *([id_list("pid", pids)] if pids else [])]
    return " ".join(parts)


def columns(rows: Sequence[AlertRow], width: int) -> tuple[Col, ...]:
    """Columns for a pane ``width`` cells wide: ALERT and WHERE as wide as their longest cell, so a name
    or a pid is never cut while the pane can hold it; the summary takes the rest."""
    name_w = max([5, *(len(r.lead.name) for r in rows)])
    where_w = max([5, *(len(where_text(r, width >= WIDE)) for r in rows)])
    if width >= WIDE:
        return (Col("state", "STATE", 10), Col("age", "FOR", 6, right=True), Col("name", "ALERT", name_w),
                Col("where", "WHERE", where_w), Col("severity", "SEVERITY", 8), Col("summary", "SUMMARY", SUMMARY_W))
    return (Col("state", "", 1), Col("name", "ALERT", name_w), Col("where", "GPU/PID", max(7, where_w)),
            Col("summary", "SUMMARY", SUMMARY_W))


def alert_cells(row: AlertRow, now: float | None, styles: dict[str, str], wide: bool = True) -> tuple[Text | str, ...]:
    a = row.lead
    colour = {"firing": styles["error"], "pending": styles["warning"]}.get(a.state, "dim")
    label = f" {a.state.upper()} " if wide else STATE_LETTER.get(a.state, "?")
    badge = Text(label, style=f"bold reverse {colour}" if a.state != "resolved" else "dim")
    since = row.oldest()
    when = age_steps(None if since is None or now is None else now - since)
    dim = "dim" if a.state == "resolved" else ""
    name = Text(a.name, style=dim or "bold")
    where = Text(where_text(row, wide), style="dim")
    summary = Text(row.summary(), style=dim)
    if not wide:
        return (badge, name, where, summary)
    return (badge, Text(when, style="dim"), name, where, Text(a.severity, style=dim or colour), summary)


class AlertsPane(RowTable):
    """Alerts of the selected source, one row each (the same alert on several GPUs: one row)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Alerts"
        self.empty_text = Text("waiting for alerts…", style="dim")
        self.counts: dict[str, int] = {}
        self._last: tuple[Sequence[Alert] | None, float | None, str] = (None, None, "")
        self._cols: tuple[Col, ...] = ()

    def on_mount(self) -> None:
        self._fit([])

    def on_resize(self) -> None:  # RowTable's own on_resize redraws too (Textual calls each class's handler)
        if self._last[0] is not None or self._cols:
            self.show(*self._last)

    def _fit(self, rows: Sequence[AlertRow]) -> bool:
        cols = columns(rows, self.size.width or 160)
        if cols != self._cols:
            self._cols = cols
            self.set_columns(cols)
        return cols[0].width > 1

    def show(self, alerts: Sequence[Alert] | None, now: float | None, note: str = "") -> None:
        self._last = (alerts, now, note)
        theme = self.app.current_theme
        styles = {"warning": theme.warning or "yellow", "error": theme.error or "red"}
        if alerts is None:
            self.empty_text = Text(note or "no alert engine", style="dim")
        else:
            self.empty_text = Text("no alerts: every rule is quiet", style=theme.success or "green")
        grouped = group_alerts(alerts or ())
        wide = self._fit(grouped)
        rows = {r.key: alert_cells(r, now, styles, wide) for r in grouped}
        self.counts = {s: sum(1 for a in alerts or () if a.state == s) for s in STATE_ORDER}
        title = f"Alerts {self.counts['firing']} firing · {self.counts['pending']} pending" if alerts else "Alerts"
        if title != self.border_title:
            self.border_title = title
        self.set_rows(list(rows), rows)
