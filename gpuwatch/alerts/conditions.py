"""Evaluators: one per condition of a rule, each keeping its own per-entity state (hysteresis latches,
sliding windows), fed one :class:`Frame` per Snapshot and answering which entities the condition holds
for right now, with the condition's value. This module has the base and the instant conditions (threshold,
stale) and all/any; :mod:`gpuwatch.alerts.windows` has the ones over a time window, and the kinds table
(:mod:`gpuwatch.alerts.kinds`) names the evaluator of each kind.

Missing data (None, NaN, an entity absent from the snapshot) never makes a condition true: like an
absent series in Prometheus, it simply has no result. Hysteresis (a threshold's ``clear``, flapping's
``low``) holds while the rule's alert for the entity is active (the ``active`` keys the engine passes), as
``ALERTS`` does in the exported PromQL, so both stop at the same moment.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuwatch.alerts.entities import Frame, Key
from gpuwatch.alerts.rules import AllOf, AnyOf, Condition, Stale, Threshold, scope_of
from gpuwatch.model.metrics import read_metric

#: How far back an instant lookup ("the value 5 minutes ago") may reach, as Prometheus' lookback delta.
LOOKBACK_S = 300.0

Results = dict[Key, float | None]

COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def read(frame: Frame, key: Key, metric: str) -> float | None:
    subject = frame.subject(key)
    return read_metric(metric, subject)  # type: ignore[arg-type]


class Evaluator:
    """Base: ``evaluate(frame, active)`` -> {entity key: value} for the entities the condition holds for;
    ``active`` are the entities the rule's alert is pending or firing for (the latch of hysteresis)."""

    def __init__(self, cond: Condition) -> None:
        self.cond = cond
        self.scope = scope_of(cond)

    def evaluate(self, frame: Frame, active: frozenset[Key] = frozenset()) -> Results:
        raise NotImplementedError


def crossed(c: Threshold, v: float, latched: bool) -> bool:
    """``v op value``; with ``clear``, while the alert is active it holds on until ``v`` passes ``clear``."""
    if COMPARE[c.op](v, c.value):
        return True
    if c.clear is None or not latched:
        return False
    return v > c.clear if c.op in (">", ">=") else v < c.clear


class ThresholdEval(Evaluator):
    """``metric op value`` per entity. Hysteresis (``clear``) latches on the rule's own alert being
    pending or firing, exactly what ``ALERTS`` gives the exported PromQL."""

    cond: Threshold

    def evaluate(self, frame: Frame, active: frozenset[Key] = frozenset()) -> Results:
        c = self.cond
        out: Results = {}
        for key in frame.keys(self.scope):
            v = read(frame, key, c.metric)
            if v is not None and crossed(c, v, key in active):
                out[key] = v
        return out


class StaleEval(Evaluator):
    """Sources whose state is not ``ok``; the value is how long they have had no fresh data."""

    cond: Stale

    def evaluate(self, frame: Frame, active: frozenset[Key] = frozenset()) -> Results:
        out: Results = {}
        for key in frame.keys("source"):
            src = frame.subject(key)
            if self.cond.sources and key[1] not in self.cond.sources:
                continue
            if getattr(src, "state", "ok") != "ok":
                out[key] = float(getattr(src, "age_s", 0.0))
        return out


class CompoundEval(Evaluator):
    """``all``: every child holds for the entity (children of a coarser scope are looked up through
    the entity's GPU or host); the value is the first finest-scope child's. ``any``: the union, the value
    taken from the first child that holds."""

    cond: AllOf | AnyOf

    def __init__(self, cond: AllOf | AnyOf, children: list[Evaluator]) -> None:
        super().__init__(cond)
        self.children = children

    def evaluate(self, frame: Frame, active: frozenset[Key] = frozenset()) -> Results:
        results = [child.evaluate(frame, active) for child in self.children]  # every child, to feed its windows
        out: Results = {}
        if isinstance(self.cond, AnyOf):
            for res in results:
                for key, value in res.items():
                    out.setdefault(key, value)
            return out
        lead = next(i for i, c in enumerate(self.children) if c.scope == self.scope)
        for key in frame.keys(self.scope):
            projected = [frame.project(key, child.scope) for child in self.children]
            if all(p is not None and p in res for p, res in zip(projected, results, strict=True)):
                out[key] = results[lead][key]
        return out
