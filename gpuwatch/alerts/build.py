"""From a rule's condition to its evaluator: :func:`build` picks the evaluator of each condition (instant
ones from :mod:`gpuwatch.alerts.conditions`, windowed ones from :mod:`gpuwatch.alerts.windows`) and joins
children with all/any."""

from __future__ import annotations

from collections.abc import Callable

from gpuwatch.alerts.conditions import Evaluator, Results, StaleEval, ThresholdEval
from gpuwatch.alerts.entities import Frame, Key
from gpuwatch.alerts.rules import AllOf, AnyOf, Condition, Flapping, Jitter, Stale, Threshold, Throttle, Volatility
from gpuwatch.alerts.windows import AverageThresholdEval, FlappingEval, JitterEval, ThrottleEval, VolatilityEval


class CompoundEval(Evaluator):
    """``all``: every child holds for the entity (children of a coarser scope are looked up through
    the entity's GPU or host); the value is the first finest-scope child's. ``any``: the union, the value
    taken from the first child that holds."""

    cond: AllOf | AnyOf

    def __init__(self, cond: AllOf | AnyOf) -> None:
        super().__init__(cond)
        self.children = [build(c) for c in cond.conditions]

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


def build(cond: Condition) -> Evaluator:
    """The evaluator of ``cond`` (and of its children), each with fresh state."""
    if isinstance(cond, Threshold):
        return AverageThresholdEval(cond) if cond.avg_s else ThresholdEval(cond)
    if isinstance(cond, (AllOf, AnyOf)):
        return CompoundEval(cond)
    if isinstance(cond, Stale):
        return StaleEval(cond)
    kinds: dict[type, Callable[..., Evaluator]] = {
        Jitter: JitterEval, Volatility: VolatilityEval, Flapping: FlappingEval, Throttle: ThrottleEval}
    return kinds[type(cond)](cond)
