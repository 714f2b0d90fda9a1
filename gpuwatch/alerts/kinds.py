"""The kinds table: one entry per kind of leaf condition, the only place a kind is named.

An entry gives the kind's dataclass (:mod:`gpuwatch.alerts.rules`), the keys a rule file may give it, the
parser that reads them, the evaluator the engine runs, its PromQL (:class:`gpuwatch.alerts.promql.Leaves`,
or None: not exportable) and the sentence of the documentation's table. The rule parser, the engine's
:func:`build`, the PromQL export, the loader's messages and the table in ``alerts/README.md`` (``gpuwatch
rules kinds``, checked by a test) all read this table, so a new kind is one new entry here.

``all`` and ``any`` are not kinds but the way kinds combine: the parser, :func:`build` and the export
treat them themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwatch.alerts.condition_fields import Fields
from gpuwatch.alerts.conditions import CompoundEval, Evaluator, StaleEval, ThresholdEval
from gpuwatch.alerts.promql import Leaves
from gpuwatch.alerts.rules import (
    AllOf,
    AnyOf,
    Climb,
    Condition,
    Flapping,
    Jitter,
    Stale,
    Threshold,
    Throttle,
    Volatility,
)
from gpuwatch.alerts.windows import (
    AverageThresholdEval,
    ClimbEval,
    FlappingEval,
    JitterEval,
    ThrottleEval,
    VolatilityEval,
)

COMPOUNDS = ("all", "any")


@dataclass(frozen=True)
class Kind:
    name: str
    #: The condition's dataclass; its ``kind`` field says ``name``.
    condition: type
    required: tuple[str, ...]
    optional: tuple[str, ...]
    #: Reads a rule's fields into the dataclass; checks that span fields report through ``Fields.problem``.
    parse: Callable[[Fields], Any]
    #: A fresh evaluator (its own windows and latches) for one condition of this kind.
    evaluator: Callable[[Any], Evaluator]
    #: ``(condition, step, latch) -> PromQL``; None: the kind has no faithful PromQL.
    promql: Callable[[Any, str, str], str] | None
    #: "holds when ...", for the documentation's table.
    holds_when: str
    #: The kind may be written with no fields at all (``- stale:``).
    bare: bool = False
    #: The fields cell of the documentation's table, where listing the keys would mislead.
    fields_doc: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        return self.required + self.optional


def _quantile(f: Fields) -> float | None:
    """``quantile`` (0 to 1) of the ``avg`` window: a percentile of the window rather than its mean."""
    if "quantile" not in f:
        return None
    q = f.number("quantile", None)
    if q is None or not 0 <= q <= 1:
        f.problem("quantile", "threshold: 'quantile' must be between 0 and 1 (0.9 is the 90th percentile)")
        return None
    if "avg" not in f:
        f.problem("quantile", "threshold: 'quantile' needs 'avg', the window it is taken over")
        return None
    return float(q)


def _threshold(f: Fields) -> Threshold:
    cond = Threshold(f.metric(), f.op(), f.number("value"), f.number("clear", None),
                     f.duration("avg", window=True) if "avg" in f else None, _quantile(f))
    if cond.clear is not None and not f.failed:
        good = (cond.op in (">", ">=") and cond.clear <= cond.value) or (
            cond.op in ("<", "<=") and cond.clear >= cond.value)
        if not good:
            side = "at or below" if cond.op in (">", ">=") else "at or above"
            f.problem("clear", f"threshold: 'clear' must be {side} 'value' for op '{cond.op}' (it is where the "
                      f"condition lets go)" if cond.op not in ("==", "!=")
                      else f"threshold: 'clear' needs op >, >=, < or <=, not '{cond.op}'")
    return cond


def _jitter(f: Fields) -> Jitter:
    rise = f.number("rise", positive=True)
    return Jitter(f.metric(), rise, f.duration("window", window=True), f.number("fall", rise, positive=True))


def _flapping(f: Fields) -> Flapping:
    high = f.number("high", percent=True)
    cond = Flapping(f.metric(), f.op(), f.number("value"), f.duration("window", window=True), high,
                    f.number("low", high, percent=True))
    if cond.low > cond.high and not f.failed:
        f.problem("low", "flapping: 'low' must not be above 'high'")
    return cond


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("threshold", Threshold, ("metric", "op", "value"), ("clear", "avg", "quantile"), _threshold,
         lambda c: AverageThresholdEval(c) if c.avg_s else ThresholdEval(c), Leaves.threshold,
         "the metric (its mean over `avg`, or with `quantile` that quantile of the window) compares true; with "
         "`clear`, while the alert is pending or firing it holds on until the metric passes `clear` "
         "(hysteresis)"),
    Kind("jitter", Jitter, ("metric", "rise", "window"), ("fall",), _jitter, JitterEval, Leaves.jitter,
         "the metric rose by `rise` since `window` ago and has fallen `fall` (default `rise`) from the window's "
         "peak"),
    Kind("volatility", Volatility, ("metric", "stddev", "window"), (),
         lambda f: Volatility(f.metric(), f.number("stddev", positive=True), f.duration("window", window=True)),
         VolatilityEval, Leaves.volatility, "the standard deviation is at least `stddev` in each half of `window` "
         "(a single step, such as one allocation that stays, lies in one half only and is not volatility); "
         "`$value` is the recent half's"),
    Kind("flapping", Flapping, ("metric", "op", "value", "window", "high"), ("low",), _flapping, FlappingEval,
         Leaves.flapping, "the percent of state changes of `metric op value` over `window` reaches `high`; while "
         "the alert is active it stops only below `low`"),
    Kind("throttle", Throttle, ("percent", "window"), ("reasons",),
         lambda f: Throttle(f.reasons(), f.number("percent", percent=True), f.duration("window", window=True)),
         ThrottleEval, Leaves.throttle, "a listed clock-event reason (default: all but `gpu_idle`) held the "
         "clocks down for `percent` of `window`"),
    Kind("climb", Climb, ("metric", "window", "limit", "within"), ("rise",),
         lambda f: Climb(f.metric(), f.duration("window", window=True), f.number("limit"), f.duration("within"),
                         f.number("rise", 0.0, positive=False)),
         ClimbEval, Leaves.climb, "a least-squares line over `window` reaches `limit` within `within`, and the "
         "metric rose at least `rise` over the window and at least half of `rise` in each half of it (a leak keeps "
         "climbing; one step up rises in one half only; `predict_linear` in PromQL); `$value` is the rise"),
    Kind("stale", Stale, (), ("source", "sources"), lambda f: Stale(f.sources()), StaleEval, Leaves.stale,
         "a source (default: any) is not delivering fresh data", bare=True,
         fields_doc="`source`? / `sources`?"),  # one of two spellings, not two fields
)}


def names() -> list[str]:
    """Every word that may open a condition: the compounds, then the kinds in table order."""
    return [*COMPOUNDS, *KINDS]


def build(cond: Condition) -> Evaluator:
    """The evaluator of ``cond`` (and of its children), each with fresh state."""
    if isinstance(cond, (AllOf, AnyOf)):
        return CompoundEval(cond, [build(c) for c in cond.conditions])
    return KINDS[cond.kind].evaluator(cond)


def _fields_cell(kind: Kind) -> str:
    if kind.fields_doc is not None:
        return kind.fields_doc
    return ", ".join([f"`{k}`" for k in kind.required] + [f"`{k}`?" for k in kind.optional])


def kinds_markdown() -> str:
    """The table of condition kinds in ``alerts/README.md``, generated from :data:`KINDS`."""
    rows = ["| kind | fields | holds when |", "| --- | --- | --- |"]
    for name, kind in KINDS.items():
        rows.append(f"| `{name}` | {_fields_cell(kind)} | {kind.holds_when} |")
        if name == "threshold":
            rows.append("| `all` / `any` | a list of conditions | every one / at least one holds; a process-level "
                        "condition is joined to its own GPU's conditions |")
    return "\n".join(rows)
