"""Typed access to the fields of one condition, for the parsers in the kinds table
(:mod:`gpuwatch.alerts.kinds`): each reader checks type, range, a known metric (with a did-you-mean) or a
duration, and reports every bad field with its line instead of stopping at the first."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from gpuwatch.alerts.rules import OPS
from gpuwatch.alerts.yamlines import LineDict, line_of
from gpuwatch.model.clock_events import NAME_TO_BIT
from gpuwatch.model.durations import format_duration, parse_duration
from gpuwatch.model.metrics import metric
from gpuwatch.model.spelling import close_matches

#: The sources a Snapshot can report on (each source's ``name``; a test checks them against the sources).
SOURCE_NAMES = ("nvml", "dcgm", "host", "kubelet", "stacks")
#: Reasons a throttle condition watches unless told otherwise: everything but "idle".
DEFAULT_THROTTLE_REASONS = tuple(n for n in NAME_TO_BIT if n != "gpu_idle")

#: The longest window a rule may look back over: a day of samples for each GPU and process it watches.
MAX_WINDOW_S = 86_400.0

Report = Callable[[int, str], None]
_FLOAT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class Fields:
    """Typed access to a leaf's fields that reports (and remembers) every bad one."""

    def __init__(self, body: LineDict, kind: str, report: Report) -> None:
        self.body, self.kind, self.report, self.failed = body, kind, report, False

    def __contains__(self, key: str) -> bool:
        return key in self.body

    def _bad(self, key: str, message: str) -> None:
        self.report(line_of(self.body, key), f"{self.kind}.{key}: {message}")
        self.failed = True

    def problem(self, key: str, message: str) -> None:
        """A field that is well formed but does not fit the others (``clear`` on the wrong side): the
        whole message is the caller's, reported at ``key``'s line."""
        self.report(line_of(self.body, key), message)
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

    def duration(self, key: str, *, window: bool = False) -> float:
        """``window``: the rule keeps every sample of this span for every GPU or process it watches, so it
        is bounded (:data:`MAX_WINDOW_S`); a horizon (``within``) is only a number."""
        try:
            seconds = parse_duration(self.body[key])
        except ValueError as exc:
            self._bad(key, str(exc))
            return 1.0
        if seconds <= 0:
            self._bad(key, "must be longer than 0s")
        elif window and seconds > MAX_WINDOW_S:
            self._bad(key, f"is {format_duration(seconds)}, longer than the {format_duration(MAX_WINDOW_S)} a rule "
                      "may look back (it holds every sample of the window in memory); judge longer trends "
                      "in Prometheus over gpuwatch's /metrics")
            return 1.0
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
                near = close_matches(n, NAME_TO_BIT, n=1)
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
                    near = close_matches(n, SOURCE_NAMES, n=1)
                    self._bad(key, f"unknown source '{n[:60]}'" + (
                        f" (did you mean '{near[0]}'?)" if near else f" (one of {', '.join(SOURCE_NAMES)})"))
                names.append(n)
        return tuple(names)

