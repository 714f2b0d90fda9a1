"""The doctor on a live history: judge the most recent window, and say since when each finding holds.

Only the current window decides what is shown, so a finding disappears within one window of the load
changing. "Since" is found by stepping back half a window at a time for as long as the same finding
(same code, GPU and process) holds; it is bounded by the history the caller keeps.

A caller that asks again and again over a growing history (the dashboard every 5 s, the daemon every
30 s) uses :class:`LiveDoctor`: a finding that held at its last call, whose window overlaps this one or
ends less than half a window before it (the daemon asks once a window), and still holds keeps the
``since`` found then, so the step-back search (up to 40 more diagnoses) runs only for findings that are
new. On a steady incident that is one diagnosis per call instead of forty-one (the daemon's, asked every
30 s over its 10 minutes, searched all forty afresh at every call while only overlapping windows counted).
The steadying below carries over only between overlapping windows, as it always has.
It also keeps what it shows steady (:mod:`gpuwatch.doctor.steady`): a finding's severity changes, and a
finding disappears, only once the change has held for half a window (``dwell_s``) over at least two
calls, so a figure wandering around a rule's cut-off does not flip the pane every few seconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gpuwatch.doctor.diagnose import diagnose, rules_out
from gpuwatch.doctor.steady import Steady
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot

LIVE_WINDOW_S = 15.0  # gpuwatch doctor, live
RECENT_WINDOW_S = 30.0  # the daemon's /api/v1/diagnosis and the dashboard's pane
MAX_STEPS = 40
MIN_SAMPLES = 3

Key = tuple[str, int | None, int | None]


def key(f: Finding) -> Key:
    return (f.code, f.gpu_index, f.pid)


def window(history: Sequence[Snapshot], seconds: float, end: float | None = None) -> list[Snapshot]:
    """Snapshots with ``end - seconds <= time <= end`` (``end``: the newest snapshot's time)."""
    if not history:
        return []
    end = history[-1].time if end is None else end
    return [s for s in history if end - seconds <= s.time <= end]


def diagnose_current(history: Sequence[Snapshot], seconds: float = RECENT_WINDOW_S,
                     pid: int | None = None) -> list[Finding]:
    """Findings of the last ``seconds``, each with ``since`` (Unix time) set."""
    return _with_since(history, seconds, pid, {})


class LiveDoctor:
    """:func:`diagnose_current` for repeated calls over one growing history (see the module's note)."""

    def __init__(self, seconds: float = RECENT_WINDOW_S, dwell_s: float | None = None) -> None:
        """``dwell_s``: how long a severity change or a disappearance must hold before it is shown
        (default half the window; 0 shows each call's findings as found)."""
        self.seconds = seconds
        self._end: float | None = None
        self._since: dict[Key, float] = {}
        self.steady = Steady(seconds / 2 if dwell_s is None else dwell_s, min_calls=2 if dwell_s != 0 else 1,
                             rules_out=rules_out)

    def __call__(self, history: Sequence[Snapshot]) -> list[Finding]:
        end = history[-1].time if history else None
        # the last call's window overlaps this one or ends just before it: a finding in both held all along
        known = self._since if self._continues(history) else {}
        overlaps = end is not None and self._end is not None and 0 <= end - self._end < self.seconds
        if not overlaps:
            self.steady.reset()  # a new history, a jump, or calls a window apart: what is shown starts afresh
        findings = _with_since(history, self.seconds, None, known)
        self._end, self._since = end, {key(f): f.since for f in findings if f.since is not None}
        return findings if end is None else self.steady(findings, end, key)

    def _continues(self, history: Sequence[Snapshot]) -> bool:
        """Whether this call's window continues the last call's: they overlap, or leave less than half a
        window between them unjudged (the step-back search's own step, so it would find the same ``since``).
        A caller asking once a window (the daemon's refresh) is one, whatever its ticks' phase."""
        if not history or self._end is None:
            return False
        return 0 <= history[-1].time - self._end < self.seconds * 1.5


def _with_since(history: Sequence[Snapshot], seconds: float, pid: int | None,
                known: dict[Key, float]) -> list[Finding]:
    recent = window(history, seconds)
    if not recent:
        return []
    findings = diagnose(recent, pid=pid)
    since = {key(f): min(known.get(key(f), recent[0].time), recent[0].time) for f in findings}
    open_keys = {k for k in since if k not in known}
    end, step = recent[-1].time, seconds / 2
    for k in range(1, MAX_STEPS + 1):
        if not open_keys:
            break
        earlier = window(history, seconds, end - k * step)
        if len(earlier) < MIN_SAMPLES:
            break
        held = {key(f) for f in diagnose(earlier, pid=pid)}
        for k_ in list(open_keys):
            if k_ in held:
                since[k_] = earlier[0].time
            else:
                open_keys.discard(k_)
    return [dataclasses.replace(f, since=since[key(f)]) for f in findings]
