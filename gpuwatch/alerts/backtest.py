"""Backtests: run rules over a recorded trace and say when each alert went pending, firing and resolved.

The engine takes its time from the Snapshots, so the same trace and rules always give the same
timeline: what a rule would have done last night, before it pages anyone tonight.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuwatch.alerts.engine import AlertEngine
from gpuwatch.alerts.rules import RuleSet
from gpuwatch.model.alert import Transition
from gpuwatch.model.durations import format_duration
from gpuwatch.model.snapshot import Snapshot

#: Labels that tell alerts of one rule apart, in the order they are shown.
_IDENTITY = ("gpu", "pid", "source", "command", "hostname")


@dataclass
class AlertSummary:
    name: str
    labels: dict[str, str]
    fired: int = 0
    firing_s: float = 0.0
    first_fired_at: float | None = None
    _since: float | None = None


@dataclass
class Backtest:
    transitions: list[Transition] = field(default_factory=list)
    snapshots: int = 0
    start: float | None = None
    end: float | None = None
    summaries: dict[str, AlertSummary] = field(default_factory=dict)


def run_backtest(rules: RuleSet, snapshots: Iterable[Snapshot]) -> Backtest:
    engine = AlertEngine(rules)
    bt = Backtest()
    for snap in snapshots:
        bt.snapshots += 1
        bt.start = snap.time if bt.start is None else bt.start
        bt.end = snap.time
        for tr in engine.evaluate(snap):
            bt.transitions.append(tr)
            _account(bt, tr)
    for s in bt.summaries.values():
        if s._since is not None and bt.end is not None:
            s.firing_s += max(0.0, bt.end - s._since)
    return bt


def _account(bt: Backtest, tr: Transition) -> None:
    a = tr.alert
    s = bt.summaries.setdefault(a.fingerprint, AlertSummary(a.name, a.labels))
    if a.state == "firing":
        s.fired += 1
        s._since = tr.time
        s.first_fired_at = tr.time if s.first_fired_at is None else s.first_fired_at
    elif tr.previous == "firing" and s._since is not None:
        s.firing_s += tr.time - s._since
        s._since = None


def _who(labels: dict[str, str]) -> str:
    return " ".join(f"{k}={labels[k]}" for k in _IDENTITY if labels.get(k))


def _clock(t: float, start: float) -> str:
    offset = round(t - start)
    return f"+{offset // 3600}:{offset // 60 % 60:02d}:{offset % 60:02d}  " + time.strftime(
        "%H:%M:%S", time.gmtime(t))


def format_timeline(bt: Backtest, title: str = "") -> str:
    """The timeline as text: one line per transition, then a summary per alert."""
    if bt.start is None or bt.end is None:
        return f"{title}: no snapshots\n" if title else "no snapshots\n"
    lines = [f"{title or 'trace'}: {bt.snapshots} snapshots over {format_duration(round(bt.end - bt.start))}, "
             f"from {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(bt.start))} UTC"]
    if not bt.transitions:
        lines.append("no alert went pending or firing")
    width = max((len(t.alert.name) for t in bt.transitions), default=0)
    for tr in bt.transitions:
        a = tr.alert
        state = "cleared" if a.state == "inactive" else a.state
        summary = a.annotations.get("summary", "") if a.state in ("pending", "firing") else ""
        lines.append(f"  {_clock(tr.time, bt.start)}  {state:<8}  {a.name:<{width}}  {_who(a.labels)}"
                     + (f"  {summary}" if summary else ""))
    fired = [s for s in bt.summaries.values() if s.fired]
    if fired:
        lines.append("fired:")
        for s in fired:
            first = _clock(s.first_fired_at or bt.start, bt.start).split()[0]
            total = format_duration(round(s.firing_s))
            lines.append(f"  {s.name} {_who(s.labels)}: {s.fired}x, {total} firing in all, first at {first}")
    return "\n".join(lines) + "\n"
