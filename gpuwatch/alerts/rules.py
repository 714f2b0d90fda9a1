"""The rule model: groups of rules, each a structured condition plus Prometheus-style ``for``,
``keep_firing_for``, labels and annotations. Loading and validation live in :mod:`gpuwatch.alerts.loader`.

Condition kinds (each names what it measures, so a rule reads like the sentence an SRE would say):
  * ``threshold``: a metric (or its mean over ``avg``) against a value, per GPU, process or host;
    ``clear`` adds hysteresis (while the rule's alert is active, it holds until the metric passes it);
  * ``all`` / ``any``: compound conditions (a process-level child joins its GPU-level siblings by GPU);
  * ``jitter``: rose by at least ``rise`` over ``window`` and has fallen back by ``fall`` (a spike);
  * ``volatility``: standard deviation over ``window`` at least ``stddev``;
  * ``flapping``: Nagios-style percent of state changes of ``metric op value`` over ``window``,
    starting at ``high`` and, while the alert is active, stopping only below ``low``;
  * ``throttle``: any of ``reasons`` (clock-event reasons) active for at least ``percent`` of ``window``;
  * ``climb``: a least-squares line over ``window`` reaches ``limit`` within ``within`` and the metric rose
    at least ``rise`` over the window (a leak heading for full; Prometheus' ``predict_linear``);
  * ``stale``: a source (or any source) not ``ok``.

Each kind is one entry of the kinds table (:mod:`gpuwatch.alerts.kinds`): its dataclass here, its keys,
parser, evaluator and PromQL there. A dataclass says what it speaks about through ``metric`` (the
catalogue's scope and unit), or, without one, through ``SCOPE`` and ``VALUE_UNIT``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypeAlias

from gpuwatch.alerts.templates import ValueUnit
from gpuwatch.model.errors import InputError, summarize
from gpuwatch.model.metrics import METRICS

Scope = Literal["host", "gpu", "process", "source"]
#: Coarse to fine: a compound's scope is its finest child's; coarser children are joined to it.
SCOPE_ORDER: dict[str, int] = {"host": 0, "source": 0, "gpu": 1, "process": 2}
OPS = (">", ">=", "<", "<=", "==", "!=")


class RuleError(InputError):
    """Rule files that cannot be used. ``errors`` holds one ``file:line: rule 'X': what is wrong`` each."""

    def __init__(self, errors: list[str] | str) -> None:
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        #: The errors as shown: each kind at most a few times, then counted (10 000 missing files: 4 lines).
        self.shown = summarize(self.errors)
        super().__init__("\n".join(self.shown))


@dataclass(frozen=True)
class Threshold:
    metric: str
    op: str
    value: float
    #: Hysteresis: once true, stays true until the metric crosses back over ``clear``.
    clear: float | None = None
    #: Compare the mean over this many seconds instead of the latest sample.
    avg_s: float | None = None
    #: With ``avg_s``: compare this quantile (0-1) of the window instead of its mean.
    quantile: float | None = None
    kind: str = field(default="threshold", init=False)


@dataclass(frozen=True)
class AllOf:
    conditions: tuple[Condition, ...]
    kind: str = field(default="all", init=False)


@dataclass(frozen=True)
class AnyOf:
    conditions: tuple[Condition, ...]
    kind: str = field(default="any", init=False)


@dataclass(frozen=True)
class Jitter:
    metric: str
    rise: float
    window_s: float
    fall: float
    kind: str = field(default="jitter", init=False)


@dataclass(frozen=True)
class Volatility:
    metric: str
    stddev: float
    window_s: float
    kind: str = field(default="volatility", init=False)


@dataclass(frozen=True)
class Flapping:
    metric: str
    op: str
    value: float
    window_s: float
    high: float
    low: float
    kind: str = field(default="flapping", init=False)
    VALUE_UNIT: ClassVar[ValueUnit] = ValueUnit("percent", 0.01)


@dataclass(frozen=True)
class Throttle:
    reasons: tuple[str, ...]
    percent: float
    window_s: float
    kind: str = field(default="throttle", init=False)
    SCOPE: ClassVar[Scope] = "gpu"
    VALUE_UNIT: ClassVar[ValueUnit] = ValueUnit("percent", 0.01)


@dataclass(frozen=True)
class Climb:
    metric: str
    window_s: float
    limit: float
    within_s: float
    rise: float
    kind: str = field(default="climb", init=False)


@dataclass(frozen=True)
class Stale:
    #: Source names; empty means any source.
    sources: tuple[str, ...] = ()
    kind: str = field(default="stale", init=False)
    SCOPE: ClassVar[Scope] = "source"
    VALUE_UNIT: ClassVar[ValueUnit] = ValueUnit("seconds", 1.0, exportable=False)


Condition: TypeAlias = "Threshold | AllOf | AnyOf | Jitter | Volatility | Flapping | Throttle | Climb | Stale"


@dataclass(frozen=True)
class Rule:
    name: str
    condition: Condition
    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    group: str = ""
    #: ``file:line`` where the rule starts, for messages.
    origin: str = ""


@dataclass(frozen=True)
class Group:
    name: str
    rules: tuple[Rule, ...]
    interval_s: float | None = None
    origin: str = ""


@dataclass(frozen=True)
class RuleSet:
    groups: tuple[Group, ...] = ()

    @property
    def rules(self) -> tuple[Rule, ...]:
        return tuple(r for g in self.groups for r in g.rules)

    def rule(self, name: str) -> Rule | None:
        return next((r for r in self.rules if r.name == name), None)

    def __len__(self) -> int:
        return len(self.rules)


def scope_of(cond: Condition) -> Scope:
    """Which entity a condition speaks about: the finest scope among its parts."""
    if isinstance(cond, (AllOf, AnyOf)):
        return max((scope_of(c) for c in cond.conditions), key=lambda s: SCOPE_ORDER[s])
    fixed: Scope | None = getattr(cond, "SCOPE", None)
    return fixed if fixed is not None else METRICS[cond.metric].scope  # type: ignore[union-attr]


def value_unit(cond: Condition) -> ValueUnit:
    """The unit of the value a condition reports (what ``{{ $value }}`` prints)."""
    if isinstance(cond, AllOf):
        scope = scope_of(cond)
        return value_unit(next(c for c in cond.conditions if scope_of(c) == scope))
    if isinstance(cond, AnyOf):
        return value_unit(cond.conditions[0])
    fixed: ValueUnit | None = getattr(cond, "VALUE_UNIT", None)
    if fixed is not None:
        return fixed
    spec = METRICS[cond.metric]  # type: ignore[union-attr]
    return ValueUnit(spec.unit, spec.prom_scale)


def value_units_clash(cond: Condition) -> str | None:
    """Why ``{{ $value }}`` would be ambiguous for ``cond`` (an ``any`` whose parts differ in unit), or None."""
    if isinstance(cond, AnyOf):
        units = sorted({value_unit(c).unit or "number" for c in cond.conditions})
        if len(units) > 1:
            return f"'any' conditions report values in different units ({', '.join(units)})"
    if isinstance(cond, (AllOf, AnyOf)):
        return next((why for c in cond.conditions if (why := value_units_clash(c))), None)
    return None


def latching(cond: Condition) -> list[Threshold | Flapping]:
    """The parts of ``cond`` with hysteresis (a threshold's ``clear``, flapping's ``low`` under ``high``)."""
    if isinstance(cond, (AllOf, AnyOf)):
        return [part for c in cond.conditions for part in latching(c)]
    if isinstance(cond, Threshold) and cond.clear is not None:
        return [cond]
    if isinstance(cond, Flapping) and cond.low < cond.high:
        return [cond]
    return []
