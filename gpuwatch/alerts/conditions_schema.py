"""Reading the ``condition:`` of a rule: one kind per mapping, every field checked (type, range, known
metric with a did-you-mean, duration), every problem reported with its line."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from typing import Any

from gpuwatch.alerts.rules import (
    OPS,
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
    scope_of,
)
from gpuwatch.alerts.yamlines import LineDict, LineList, line_of
from gpuwatch.model.clock_events import NAME_TO_BIT
from gpuwatch.model.durations import parse_duration
from gpuwatch.model.metrics import metric

#: The sources a Snapshot can report on (each source's ``name``; a test checks them against the sources).
SOURCE_NAMES = ("nvml", "dcgm", "host", "kubelet")

KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # kind: (required fields, optional fields)
    "threshold": (("metric", "op", "value"), ("clear", "avg", "quantile")),
    "jitter": (("metric", "rise", "window"), ("fall",)),
    "volatility": (("metric", "stddev", "window"), ()),
    "flapping": (("metric", "op", "value", "window", "high"), ("low",)),
    "throttle": (("percent", "window"), ("reasons",)),
    "climb": (("metric", "window", "limit", "within"), ("rise",)),
    "stale": ((), ("source", "sources")),
}
#: Reasons a throttle condition watches unless told otherwise: everything but "idle".
DEFAULT_THROTTLE_REASONS = tuple(n for n in NAME_TO_BIT if n != "gpu_idle")

Report = Callable[[int, str], None]
_FLOAT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class ConditionParser:
    def __init__(self, report: Report) -> None:
        self.report = report

    def parse(self, raw: Any, line: int) -> Condition | None:
        kinds = ", ".join(["all", "any", *KINDS])
        if not isinstance(raw, LineDict) or len(raw) != 1:
            self.report(line_of(raw, default=line), f"a condition is a mapping with exactly one of: {kinds}")
            return None
        kind, body = next(iter(raw.items()))
        line = line_of(raw, kind)
        if kind in ("all", "any"):
            return self._compound(kind, body, line)
        if kind not in KINDS:
            near = difflib.get_close_matches(str(kind), ["all", "any", *KINDS], n=1)
            self.report(line, f"unknown condition '{kind}'" + (f" (did you mean '{near[0]}'?)" if near
                                                                   else f" (one of: {kinds})"))
            return None
        if body is None and kind == "stale":
            body = LineDict()
            body.line, body.key_lines, body.duplicates = line, {}, []
        if not isinstance(body, LineDict):
            self.report(line, f"'{kind}' needs a mapping of fields: {', '.join(KINDS[kind][0])}")
            return None
        return self._leaf(kind, body)

    def _compound(self, kind: str, body: Any, line: int) -> Condition | None:
        if not isinstance(body, LineList) or not body:
            self.report(line, f"'{kind}' needs a list of conditions")
            return None
        children = [self.parse(c, line_of(body, i)) for i, c in enumerate(body)]
        if any(c is None for c in children):
            return None
        conds = tuple(c for c in children if c is not None)
        scopes = [scope_of(c) for c in conds]
        if "source" in scopes and len(conds) > 1:
            self.report(line, "'stale' cannot be combined with other conditions; give it a rule of its own")
            return None
        if kind == "any" and len(set(scopes)) > 1:
            self.report(line, f"'any' needs conditions about the same thing, got {', '.join(sorted(set(scopes)))} "
                        "(use separate rules)")
            return None
        return AllOf(conds) if kind == "all" else AnyOf(conds)

    def _leaf(self, kind: str, body: LineDict) -> Condition | None:
        required, optional = KINDS[kind]
        ok = True
        for key in body:
            if key not in required + optional:
                near = difflib.get_close_matches(str(key), required + optional, n=1)
                hint = f"did you mean '{near[0]}'?" if near else f"allowed: {', '.join(required + optional)}"
                self.report(line_of(body, key), f"{kind}: unknown key '{key}' ({hint})")
                ok = False
        for key in required:
            if key not in body:
                self.report(body.line, f"{kind}: missing '{key}'")
                ok = False
        if not ok:
            return None
        f = _Fields(body, kind, self.report)
        cond: Condition | None
        if kind == "threshold":
            cond = Threshold(f.metric(), f.op(), f.number("value"), f.number("clear", None),
                             f.duration("avg") if "avg" in body else None, _quantile(f, body, self.report))
        elif kind == "jitter":
            rise = f.number("rise", positive=True)
            cond = Jitter(f.metric(), rise, f.duration("window"), f.number("fall", rise, positive=True))
        elif kind == "volatility":
            cond = Volatility(f.metric(), f.number("stddev", positive=True), f.duration("window"))
        elif kind == "flapping":
            high = f.number("high", percent=True)
            cond = Flapping(f.metric(), f.op(), f.number("value"), f.duration("window"), high,
                            f.number("low", high, percent=True))
        elif kind == "throttle":
            cond = Throttle(f.reasons(), f.number("percent", percent=True), f.duration("window"))
        elif kind == "climb":
            cond = Climb(f.metric(), f.duration("window"), f.number("limit"), f.duration("within"),
                         f.number("rise", 0.0, positive=False))
        else:
            cond = Stale(f.sources())
        if f.failed:
            return None
        return self._semantics(cond, body)

    def _semantics(self, cond: Condition, body: LineDict) -> Condition | None:
        if isinstance(cond, Threshold) and cond.clear is not None:
            good = (cond.op in (">", ">=") and cond.clear <= cond.value) or (
                cond.op in ("<", "<=") and cond.clear >= cond.value)
            if not good:
                side = "at or below" if cond.op in (">", ">=") else "at or above"
                self.report(line_of(body, "clear"), f"threshold: 'clear' must be {side} 'value' for op "
                            f"'{cond.op}' (it is where the condition lets go)" if cond.op not in ("==", "!=")
                            else f"threshold: 'clear' needs op >, >=, < or <=, not '{cond.op}'")
                return None
        if isinstance(cond, Flapping) and cond.low > cond.high:
            self.report(line_of(body, "low"), "flapping: 'low' must not be above 'high'")
            return None
        return cond


class _Fields:
    """Typed access to a leaf's fields that reports (and remembers) every bad one."""

    def __init__(self, body: LineDict, kind: str, report: Report) -> None:
        self.body, self.kind, self.report, self.failed = body, kind, report, False

    def _bad(self, key: str, message: str) -> None:
        self.report(line_of(self.body, key), f"{self.kind}.{key}: {message}")
        self.failed = True

    def metric(self) -> str:
        key = self.body["metric"]
        try:
            metric(str(key))
        except KeyError as exc:
            self._bad("metric", str(exc.args[0]))
        return str(key)

    def op(self) -> str:
        op = self.body["op"]
        if op not in OPS:
            self._bad("op", f"'{op}' is not a comparison (one of {' '.join(OPS)}; quote it in YAML)")
        return str(op)

    def number(self, key: str, default: float | None = 0.0, *, positive: bool = False, percent: bool = False) -> Any:
        if key not in self.body:
            return default
        v = self.body[key]
        if isinstance(v, str) and _FLOAT.match(v.strip()):
            v = float(v)  # YAML 1.1 reads 1e9 as a string; people mean the number
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            self._bad(key, f"must be a number, got {repr(v)[:60]}")
            return 0.0
        if not math.isfinite(v):
            self._bad(key, f"must be a finite number, got {v}")
            return 0.0
        if positive and v <= 0:
            self._bad(key, f"must be greater than 0, got {v}")
        if percent and not 0 <= v <= 100:
            self._bad(key, f"is a percentage, 0 to 100, got {v}")
        return float(v)

    def duration(self, key: str) -> float:
        try:
            seconds = parse_duration(self.body[key])
        except ValueError as exc:
            self._bad(key, str(exc))
            return 1.0
        if seconds <= 0:
            self._bad(key, "must be longer than 0s")
        return seconds

    def _names(self, key: str) -> tuple[str, ...]:
        raw = self.body[key]
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            self._bad(key, "must be a name or a list of names")
            return ()
        return tuple(items)

    def reasons(self) -> tuple[str, ...]:
        if "reasons" not in self.body:
            return DEFAULT_THROTTLE_REASONS
        names = self._names("reasons")
        for n in names:
            if n not in NAME_TO_BIT:
                near = difflib.get_close_matches(n, NAME_TO_BIT, n=1)
                self._bad("reasons", f"unknown clock-event reason '{n}'" + (
                    f" (did you mean '{near[0]}'?)" if near else f" (one of {', '.join(NAME_TO_BIT)})"))
        return names

    def sources(self) -> tuple[str, ...]:
        names = []
        for key in ("source", "sources"):
            if key not in self.body:
                continue
            for n in self._names(key):  # a misspelt source never reports stale: the rule could never fire
                if n not in SOURCE_NAMES:
                    near = difflib.get_close_matches(n, SOURCE_NAMES, n=1)
                    self._bad(key, f"unknown source '{n[:60]}'" + (
                        f" (did you mean '{near[0]}'?)" if near else f" (one of {', '.join(SOURCE_NAMES)})"))
                names.append(n)
        return tuple(names)


def _quantile(f: _Fields, body: Any, report: Any) -> float | None:
    """``quantile`` (0 to 1) of the ``avg`` window: a percentile of the window rather than its mean."""
    if "quantile" not in body:
        return None
    q = f.number("quantile", None)
    if q is None or not 0 <= q <= 1:
        report(body.line, "threshold: 'quantile' must be between 0 and 1 (0.9 is the 90th percentile)")
        return None
    if "avg" not in body:
        report(body.line, "threshold: 'quantile' needs 'avg', the window it is taken over")
        return None
    return float(q)
