"""Hysteresis for findings asked for again and again: what is shown changes only when the change holds.

The doctor's rules cut at fixed figures (an input-bound GPU is "critical" under 30 % GPU-Util, "warning"
above), so a figure wandering around a cut-off would flip a finding's severity, or make it appear and
disappear, at every call. An alert has ``for`` for this; a finding has :class:`Steady`:

- a finding that appears is shown at once (a new problem is news);
- its **severity** changes only once the new severity has been found at every call for ``dwell_s``
  seconds (snapshot time) and at least ``min_calls`` calls in a row, *and* its score (the rule's figure of
  what the problem costs, higher when worse) has moved at least ``score_band`` points past the last score
  found at the shown severity, towards the new one: a Schmitt trigger around the rule's cut-off without
  knowing where the cut-off is (for the input-bound rule, 2 points of score are 5 points of GPU-Util).
  One call back at the shown severity cancels the change. A rule whose score does not follow its
  severity still changes after ``10 * dwell_s``;
- it **disappears** only once it has been missing at every call for ``dwell_s`` seconds and ``min_calls``
  calls; until then the last one seen is shown (a finding that comes back in the meantime never left);
- where the doctor's own verdicts exclude each other (``rules_out(found, kept)``: the idle breakdown once
  a cause is found for that GPU, "healthy" once a warning is), what is shown never contradicts itself, and
  the shown verdict changes only once the change holds, in either direction: a new finding that would
  displace a shown one it rules out (a cause found where the idle breakdown is shown) is shown only once
  it has been found at every call for ``dwell_s`` seconds and ``min_calls`` calls, the shown one staying
  until then; a new one that a kept finding rules out waits until that one has gone. (A figure on a
  rule's cut-off would otherwise swap two verdicts at every call: a cause that appears in one window and
  not the next.) The same closing verdict about another process replaces the old one at once: there
  is one per GPU, and the newer one speaks;
- the **top** finding of a GPU (the verdict) gives way to another of the same or a lower severity only once
  that one has been found at every call for ``dwell_s`` and ``min_calls``; a more severe one takes it at once.

Noise around a cut-off therefore moves nothing: only a figure that stays on the other side does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from gpuwatch.model.finding import Finding
from gpuwatch.model.severity import Severity, severity_rank


@dataclass
class _Shown:
    finding: Finding  # the last one found, with the severity shown
    severity: Severity
    #: (severity, first call's time, calls) of a severity found but not yet shown
    change: tuple[Severity, float, int] | None = None
    #: (first call's time, calls) it has been missing for
    missing: tuple[float, int] | None = None
    #: (first call's time, calls) it has been found at every call for
    found: tuple[float, int] | None = None
    #: the score of the last call that found the shown severity
    edge: float = 0.0


class Steady:
    """Feed it each call's findings with the newest snapshot's time; it returns what to show."""

    def __init__(self, dwell_s: float, min_calls: int = 2, score_band: float = 2.0,
                 rules_out: Callable[[Finding, Finding], bool] = lambda found, kept: False) -> None:
        """``rules_out(a, b)``: finding ``a`` being there means ``b`` cannot be (the doctor never reports
        both about one GPU)."""
        self.dwell_s = dwell_s
        self.min_calls = min_calls
        self.score_band = score_band
        self.rules_out = rules_out
        self._shown: dict[Hashable, _Shown] = {}
        #: (first call's time, calls) of new findings waiting to displace a shown one they rule out
        self._challengers: dict[Hashable, tuple[float, int]] = {}
        #: the key of the top finding shown per GPU at the last call
        self._top: dict[int | None, Hashable] = {}

    def reset(self) -> None:
        self._shown.clear()
        self._challengers.clear()
        self._top.clear()

    def _held(self, first: float, calls: int, now: float) -> bool:
        return now - first >= self.dwell_s and calls >= self.min_calls

    def __call__(self, findings: Sequence[Finding], now: float, key: Callable[[Finding], Hashable]) -> list[Finding]:
        """``key(finding)``: what makes two findings the same one (code, GPU, process)."""
        keyed = {key(f): f for f in findings}
        self._challengers = {k: v for k, v in self._challengers.items() if k in keyed}  # found at every call
        keyed = {k: f for k, f in keyed.items() if not self._challenging(k, f, keyed, now)}
        out: list[Finding] = []
        new: list[Hashable] = []
        for k, f in keyed.items():
            s = self._shown.get(k)
            if s is None:
                self._shown[k] = s = _Shown(f, f.severity, edge=f.score)
                new.append(k)
            s.missing = None
            s.found = (s.found[0], s.found[1] + 1) if s.found else (now, 1)
            if f.severity == s.severity:
                s.change, s.edge = None, f.score
            else:
                first, calls = (s.change[1], s.change[2] + 1) if s.change and s.change[0] == f.severity else (now, 1)
                s.change = (f.severity, first, calls)
                worse = severity_rank(f.severity) < severity_rank(s.severity)
                moved = (f.score - s.edge if worse else s.edge - f.score) >= self.score_band
                if self._held(first, calls, now) and (moved or now - first >= 10 * self.dwell_s):
                    s.severity, s.change, s.edge = f.severity, None, f.score
            s.finding = f if f.severity == s.severity else dataclasses.replace(f, severity=s.severity)
            out.append(s.finding)
        kept: list[Finding] = []
        for k in [k for k in self._shown if k not in keyed]:
            s = self._shown[k]
            first, calls = (s.missing[0], s.missing[1] + 1) if s.missing else (now, 1)
            s.missing, s.change, s.found = (first, calls), None, None
            if self._held(first, calls, now) or self._ruled_out(s.finding, out):
                del self._shown[k]
            else:
                kept.append(s.finding)
        for k in new:  # found now, but contradicted by one still shown: not yet
            if self._ruled_out(keyed[k], kept):
                del self._shown[k]
                out.remove(keyed[k])
        return self._top_holds(sorted(out + kept, key=lambda f: f.rank_key), now, key)

    def _top_holds(self, ranked: list[Finding], now: float, key: Callable[[Finding], Hashable]) -> list[Finding]:
        """The top finding of each GPU (the verdict) changes only once the new top has been found at every
        call for the dwell, unless it is more severe: a finding of the same severity that outranks the shown
        top in one window and not the next does not swap the verdict back and forth."""
        out = list(ranked)
        tops: dict[int | None, Hashable] = {}
        for gpu in dict.fromkeys(f.gpu_index for f in ranked):
            mine = [f for f in out if f.gpu_index == gpu]
            first = mine[0]
            held = self._top.get(gpu)
            incumbent = next((f for f in mine if key(f) == held), None)
            s = self._shown.get(key(first))
            if incumbent is not None and incumbent is not first and \
                    severity_rank(first.severity) >= severity_rank(incumbent.severity) and \
                    not (s is not None and s.found is not None and self._held(*s.found, now)):
                out.remove(incumbent)
                out.insert(out.index(first), incumbent)
                first = incumbent
            tops[gpu] = key(first)
        self._top = tops
        return out

    def _challenging(self, k: Hashable, f: Finding, found: dict[Hashable, Finding], now: float) -> bool:
        """``f`` is new and would displace a shown finding it rules out (another code: a cause where the idle
        breakdown is shown), and has not yet been found for the dwell: it waits, the shown one stays."""
        if k in self._shown:
            return False
        displaced = [s.finding for o, s in self._shown.items() if o not in found
                     and s.finding.code != f.code and self._ruled_out(s.finding, [f])]
        if not displaced:
            self._challengers.pop(k, None)
            return False
        first, calls = self._challengers.get(k, (now, 0))
        if self._held(first, calls + 1, now):
            self._challengers.pop(k, None)
            return False
        self._challengers[k] = (first, calls + 1)
        return True

    def _ruled_out(self, f: Finding, by: Sequence[Finding]) -> bool:
        return any(o.gpu_index == f.gpu_index and self.rules_out(o, f) for o in by)
