"""Going back in time on a paused dashboard: which snapshot a moment is, the steps, the marker, the verdict.

A paused dashboard can show any moment the history still holds (the sampler's ring: ten minutes by default,
``--history``). A moment is a snapshot's time; every pane draws from the newest snapshot at or before it,
and the history plot from the history cut there, so the panels, the chart and the process table agree. The
Diagnosis pane at a past moment is a fresh doctor evaluation of the window that ends there
(:func:`diagnose_at`): the live doctor's steadied state belongs to the present, and carrying it back would
show findings that had not happened yet.
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from collections.abc import Sequence

from gpuwatch.model.alert import Alert
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.history import History
from gpuwatch.tui import analysis
from gpuwatch.tui.feed import DIAGNOSIS_HISTORY_S


def index_at(snapshots: Sequence[Snapshot], moment: float) -> int:
    """The index of the newest snapshot at or before ``moment`` (the oldest one when ``moment`` is earlier
    than all of them); ``snapshots`` oldest first and not empty."""
    times = [s.time for s in snapshots]
    return max(0, bisect.bisect_right(times, moment) - 1)


def snapshot_at(history: History, moment: float) -> Snapshot | None:
    """The snapshot a paused dashboard shows at ``moment``: the newest at or before it."""
    snapshots = list(history)
    return snapshots[index_at(snapshots, moment)] if snapshots else None


def step(history: History, moment: float, *, ticks: int = 0, seconds: float = 0.0) -> float:
    """The moment ``ticks`` snapshots or ``seconds`` away from ``moment`` (negative: back), kept inside the
    history: going back past its oldest snapshot stops there, forward past its newest stops there."""
    snapshots = list(history)
    if not snapshots:
        return moment
    if ticks:
        at = index_at(snapshots, moment) + ticks
        return snapshots[min(len(snapshots) - 1, max(0, at))].time
    return snapshots[index_at(snapshots, moment + seconds)].time


def history_until(history: History, moment: float) -> History:
    """The history as it stood at ``moment`` (what the plot draws): its snapshots up to ``moment``."""
    cut = History(capacity=history.capacity)
    for snap in history:
        if snap.time > moment:
            break
        cut.append(snap)
    return cut


def diagnose_at(history: History, moment: float, window_s: float) -> tuple[list[Finding] | None, str]:
    """The doctor's findings over the ``window_s`` seconds that end at ``moment``, as if it were now."""
    latest = snapshot_at(history, moment)
    if latest is None:
        return [], ""
    recent = [s for s in history if latest.time - DIAGNOSIS_HISTORY_S <= s.time <= latest.time]
    return analysis.diagnose(recent, window_s)


def ago_words(seconds: float) -> str:
    """``−12 s``, ``−2 min 10 s``, ``−1 h 5 min``: how far behind the newest snapshot a moment is."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"−{whole} s"
    if whole < 3600:
        m, s = divmod(whole, 60)
        return f"−{m} min {s} s" if s else f"−{m} min"
    h, rest = divmod(whole, 3600)
    return f"−{h} h {rest // 60} min"


def marker(moment: float, newest: float | None) -> str:
    """``PAUSED at 14:03:12 (−2 min 10 s)``: the moment shown (UTC, as the status line's clock) and how far
    it is behind the newest snapshot."""
    text = f"PAUSED at {time.strftime('%H:%M:%S', time.gmtime(moment))}"
    if newest is not None and newest - moment >= 0.5:
        text += f" ({ago_words(newest - moment)})"
    return text


def alerts_at(alerts: Sequence[Alert] | None, moment: float) -> tuple[Alert, ...] | None:
    """The alerts as they stood at ``moment``, told from the newest ones: each active then is pending or
    firing as it was at that moment, one resolved by then stays resolved, one that began later is left out."""
    if alerts is None:
        return None
    out = []
    for a in alerts:
        if a.active_since is None or a.active_since > moment:
            continue
        if a.resolved_at is not None and a.resolved_at <= moment:
            out.append(a)
        elif a.fired_at is not None and a.fired_at <= moment:
            out.append(dataclasses.replace(a, state="firing", resolved_at=None))
        else:
            out.append(dataclasses.replace(a, state="pending", fired_at=None, resolved_at=None))
    return tuple(out)
