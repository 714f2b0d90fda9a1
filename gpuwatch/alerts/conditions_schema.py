"""Reading the ``condition:`` of a rule: one kind per mapping (looked up in the kinds table), every field
checked (type, range, known metric with a did-you-mean, duration), every problem reported with its line."""

from __future__ import annotations

from typing import Any

from gpuwatch.alerts.condition_fields import Fields, Report
from gpuwatch.alerts.kinds import KINDS, names
from gpuwatch.alerts.rules import AllOf, AnyOf, Condition, scope_of
from gpuwatch.alerts.yamlines import LineDict, LineList, line_of
from gpuwatch.model.spelling import close_matches


class ConditionParser:
    def __init__(self, report: Report) -> None:
        self.report = report

    def parse(self, raw: Any, line: int) -> Condition | None:
        kinds = ", ".join(names())
        if not isinstance(raw, LineDict) or len(raw) != 1:
            self.report(line_of(raw, default=line), f"a condition is a mapping with exactly one of: {kinds}")
            return None
        kind, body = next(iter(raw.items()))
        line = line_of(raw, kind)
        if kind in ("all", "any"):
            return self._compound(kind, body, line)
        if kind not in KINDS:
            near = close_matches(str(kind), names(), n=1)
            self.report(line, f"unknown condition '{kind}'" + (f" (did you mean '{near[0]}'?)" if near
                                                                   else f" (one of: {kinds})"))
            return None
        if body is None and KINDS[kind].bare:
            body = LineDict()
            body.line, body.key_lines, body.duplicates = line, {}, []
        if not isinstance(body, LineDict):
            self.report(line, f"'{kind}' needs a mapping of fields: {', '.join(KINDS[kind].required)}")
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

    def _leaf(self, name: str, body: LineDict) -> Condition | None:
        kind = KINDS[name]
        ok = True
        for key in body:
            if key not in kind.keys:
                near = close_matches(str(key), kind.keys, n=1)
                hint = f"did you mean '{near[0]}'?" if near else f"allowed: {', '.join(kind.keys)}"
                self.report(line_of(body, key), f"{name}: unknown key '{key}' ({hint})")
                ok = False
        for key in kind.required:
            if key not in body:
                self.report(body.line, f"{name}: missing '{key}'")
                ok = False
        if not ok:
            return None
        fields = Fields(body, name, self.report)
        cond: Condition = kind.parse(fields)
        return None if fields.failed else cond
