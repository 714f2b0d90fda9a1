"""The alert engine: feeds Snapshots, in time order, through every rule's condition and moves each
alert through inactive -> pending -> firing -> resolved the way Prometheus does for ``for`` and
``keep_firing_for``. Time comes only from ``Snapshot.time``, so a backtest gives the same answer every run.

Time that misbehaves:
  * the clock steps backwards (NTP, a looped recording): the step is counted as one usual sampling
    interval, so durations already measured survive and ``for`` neither restarts nor jumps;
  * a gap longer than ``max_gap_s`` (nothing sampled): a pending alert restarts its ``for``, because the
    condition cannot be said to have held while nobody looked; a firing alert goes on from the new value.
A process alert resolves at once when its process is gone (``keep_firing_for`` holds flapping values,
not dead processes). Resolved alerts stay listed for ``resolved_retention_s``.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field

from gpuwatch.alerts.entities import Frame, Key
from gpuwatch.alerts.kinds import build
from gpuwatch.alerts.rules import Rule, RuleSet, value_unit
from gpuwatch.alerts.templates import render
from gpuwatch.model.alert import Alert, AlertState, Transition, fingerprint
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)

MAX_GAP_S = 300.0
RESOLVED_RETENTION_S = 900.0


@dataclass
class _State:
    """The mutable life of one alert; times are engine time (see ``AlertEngine._offset``)."""

    key: Key
    labels: dict[str, str]
    fingerprint: str
    state: AlertState
    active_since: float
    fired_at: float | None = None
    resolved_at: float | None = None
    keep_firing_since: float | None = None
    value: float | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    #: The rule whose annotations were rendered (a reload may change the text of a rule that keeps its name).
    rendered_by: Rule | None = None


class _RuleRuntime:
    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.evaluator = build(rule.condition)
        self.unit = value_unit(rule.condition)
        self.states: dict[str, _State] = {}


class AlertEngine:
    """Evaluate ``rules`` over Snapshots; safe to read (``alerts``) from another thread."""

    def __init__(self, rules: RuleSet, *, max_gap_s: float = MAX_GAP_S,
                 resolved_retention_s: float = RESOLVED_RETENTION_S) -> None:
        self._rules = rules
        self._runtimes = [_RuleRuntime(r) for r in rules.rules]
        self.max_gap_s = max_gap_s
        self.resolved_retention_s = resolved_retention_s
        self._lock = threading.Lock()
        self._last: float | None = None  # engine time of the last snapshot
        self._step = 1.0                 # the usual sampling interval, learnt from the snapshots
        self._offset = 0.0               # engine time = snapshot time + offset (grows on backward steps)
        #: Bumped whenever an alert's state, value or text may have changed; alerts() keeps its last list
        #: until then (the alert worker asks after every Snapshot, and most change nothing).
        self._version = 0
        self._listed: tuple[int, list[Alert]] | None = None

    @property
    def rules(self) -> RuleSet:
        return self._rules

    def replace_rules(self, rules: RuleSet) -> None:
        """Swap rule sets (a reload). Alerts of rules that keep their name keep their state; a rule whose
        condition is unchanged also keeps its windows."""
        with self._lock:
            old = {rt.rule.name: rt for rt in self._runtimes}
            runtimes = []
            for rule in rules.rules:
                rt = _RuleRuntime(rule)
                prev = old.get(rule.name)
                if prev is not None:
                    rt.states = prev.states
                    if prev.rule.condition == rule.condition:
                        rt.evaluator = prev.evaluator
                runtimes.append(rt)
            self._rules, self._runtimes = rules, runtimes
            self._version += 1

    def evaluate(self, snapshot: Snapshot) -> list[Transition]:
        """Advance to ``snapshot`` (call once per Snapshot, in time order); the state changes it caused."""
        if not math.isfinite(snapshot.time):
            log.warning("alert engine: skipped a snapshot with time %r", snapshot.time)
            return []
        with self._lock:
            now, gap = self._advance(snapshot.time)
            frame = Frame(snapshot, now)
            out: list[Transition] = []
            for rt in self._runtimes:
                out.extend(self._step_rule(rt, frame, gap))
            return out

    def alerts(self) -> list[Alert]:
        """Pending, firing and recently resolved alerts, in rule order then label order."""
        with self._lock:
            if self._listed is None or self._listed[0] != self._version:
                self._listed = (self._version, [self._alert(rt, st) for rt in self._runtimes
                                                for st in sorted(rt.states.values(),
                                                                 key=lambda s: sorted(s.labels.items()))])
            return list(self._listed[1])

    def _advance(self, t: float) -> tuple[float, bool]:
        now = t + self._offset
        gap = False
        if self._last is not None:
            if not now > self._last:  # backwards (or repeated): count it as one usual interval
                shift = self._last + self._step - now
                self._offset += shift
                now += shift
            elif now - self._last > self.max_gap_s:
                gap = True
            else:
                self._step = now - self._last
        self._last = now
        return now, gap

    def _step_rule(self, rt: _RuleRuntime, frame: Frame, gap: bool) -> list[Transition]:
        rule, now = rt.rule, frame.now
        out: list[Transition] = []
        active = frozenset(st.key for st in rt.states.values() if st.state in ("pending", "firing")) \
            if rt.states else frozenset()
        hits = rt.evaluator.evaluate(frame, active)
        if not hits and not rt.states:
            return out  # most rules on most ticks: nothing holds and nothing was active
        self._version += 1  # values, annotations or states may change: alerts() makes its list afresh
        seen: set[str] = set()
        for key, value in hits.items():
            labels = {"alertname": rule.name, **frame.labels(key), **rule.labels}
            fp = fingerprint(labels)
            seen.add(fp)
            st = rt.states.get(fp)
            previous: AlertState
            if st is None or st.state == "resolved":
                previous, st = "inactive", _State(key, labels, fp, "pending", now)
                rt.states[fp] = st
            else:
                previous = st.state
                if gap and st.state == "pending":
                    st.active_since = now
            # the same labels and value render the same text: rendered again only when one changed
            if st.rendered_by is not rule or st.labels != labels or st.value != value:
                st.annotations = {k: render(v, labels, value, rt.unit) for k, v in rule.annotations.items()}
                st.rendered_by = rule
            st.key, st.labels, st.value, st.keep_firing_since = key, labels, value, None
            if st.state == "pending" and now - st.active_since >= rule.for_s:
                st.state, st.fired_at = "firing", now
            if st.state != previous:
                out.append(Transition(self._alert(rt, st), previous, now - self._offset))
        for fp, st in list(rt.states.items()):
            if fp in seen:
                continue
            if st.state == "pending":
                del rt.states[fp]
                st.state = "inactive"
                out.append(Transition(self._alert(rt, st), "pending", now - self._offset))
            elif st.state == "firing" and not self._keep_firing(rule, st, frame):
                st.state, st.resolved_at = "resolved", now
                out.append(Transition(self._alert(rt, st), "firing", now - self._offset))
            elif st.state == "resolved" and now - (st.resolved_at or now) > self.resolved_retention_s:
                del rt.states[fp]
        return out

    @staticmethod
    def _keep_firing(rule: Rule, st: _State, frame: Frame) -> bool:
        if rule.keep_firing_for_s <= 0 or (st.key[0] == "process" and not frame.has(st.key)):
            return False
        if st.keep_firing_since is None:
            st.keep_firing_since = frame.now
        return frame.now - st.keep_firing_since < rule.keep_firing_for_s

    def _wall(self, t: float | None) -> float | None:
        return None if t is None else t - self._offset

    def _alert(self, rt: _RuleRuntime, st: _State) -> Alert:
        return Alert(name=rt.rule.name, fingerprint=st.fingerprint, labels=dict(st.labels),
                     annotations=dict(st.annotations), state=st.state, active_since=self._wall(st.active_since),
                     fired_at=self._wall(st.fired_at), resolved_at=self._wall(st.resolved_at), value=st.value,
                     group=rt.rule.group, origin=rt.rule.origin)
