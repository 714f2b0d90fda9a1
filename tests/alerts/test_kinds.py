"""The kinds table is the one place a kind of condition is named: the parser, the engine, the PromQL
export, the loader's messages and the documentation's table all read it. A kind added here, in a test,
by one entry of the table only, is parsed, evaluated, exported and documented."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuwatch.alerts import RuleError, parse_rules
from gpuwatch.alerts.conditions import read
from gpuwatch.alerts.entities import Frame, Key
from gpuwatch.alerts.export import export_prometheus
from gpuwatch.alerts.kinds import KINDS, Kind, kinds_markdown
from gpuwatch.alerts.windows import Window, WindowEval
from gpuwatch.model.durations import format_duration
from gpuwatch.model.metrics import METRICS

from .build import engine_for, gpu, rule_yaml, snap, states_over

README = Path(__file__).resolve().parents[2] / "alerts" / "README.md"


def test_the_documented_table_is_the_kinds_table() -> None:
    found = re.search(r"<!-- condition kinds: start -->\n(.*?)\n<!-- condition kinds: end -->",
                      README.read_text(encoding="utf-8"), re.S)
    assert found is not None, "alerts/README.md has no generated table of condition kinds"
    assert found.group(1) == kinds_markdown(), "regenerate it: gpuwatch rules kinds"


@pytest.mark.parametrize("name", list(KINDS))
def test_each_entry_names_its_own_dataclass(name: str) -> None:
    kind = KINDS[name]
    assert kind.condition.__dataclass_fields__["kind"].default == name
    assert f"| `{name}` |" in kinds_markdown()


# -- a new kind, added by one entry ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Floor:
    """Stayed below ``value`` for the whole window: the metric's maximum over ``window`` is under it."""

    metric: str
    value: float
    window_s: float
    kind: str = field(default="floor", init=False)


class FloorEval(WindowEval):
    cond: Floor

    def sample(self, frame: Frame, key: Key) -> float | None:
        return read(frame, key, self.cond.metric)

    def reduce(self, window: Window, now: float, latched: bool) -> float | None:
        peak = max(window.values())
        full = window.base(now, self.window_s) is not None
        return peak if full and peak < self.cond.value else None


def _floor_promql(cond: Floor, step: str, latch: str) -> str:
    spec = METRICS[cond.metric]
    name = spec.prom_name
    w = format_duration(cond.window_s)
    return f"max_over_time({name}[{w}]) < {cond.value * spec.prom_scale:g} and {name} offset {w}"


FLOOR = Kind("floor", Floor, ("metric", "value", "window"), (),
             lambda f: Floor(f.metric(), f.number("value"), f.duration("window")), FloorEval, _floor_promql,
             "the metric stayed below `value` for the whole `window`")


@pytest.fixture
def floor_kind(monkeypatch: pytest.MonkeyPatch) -> Kind:
    monkeypatch.setitem(KINDS, "floor", FLOOR)
    return FLOOR


def test_a_new_kind_is_parsed_evaluated_and_fires(floor_kind: Kind) -> None:
    engine = engine_for("{floor: {metric: gpu.util, value: 10, window: 10s}}")
    idle = [snap(t, [gpu(util=3.0)]) for t in range(0, 15)]
    states = states_over(engine, idle)
    assert states[:10] == ["-"] * 10          # no full window yet
    assert states[11:] == ["firing"] * 4      # a whole window under 10 %
    busy = states_over(engine, [snap(15, [gpu(util=60.0)])])
    assert busy == ["resolved"]


def test_a_new_kind_is_exported_as_its_promql(floor_kind: Kind) -> None:
    text = export_prometheus(parse_rules(rule_yaml("{floor: {metric: gpu.util, value: 10, window: 10m}}"))).text
    assert ("max_over_time(gpuwatch_gpu_utilization_ratio[10m]) < 0.1 and gpuwatch_gpu_utilization_ratio "
            "offset 10m") in text


def test_a_new_kind_gets_the_parsers_checks_and_messages(floor_kind: Kind) -> None:
    with pytest.raises(RuleError) as bad:
        parse_rules(rule_yaml("{floor: {metric: gpu.util, valeu: 10, window: 10s}}"), "r.yml")
    assert "floor: unknown key 'valeu' (did you mean 'value'?)" in str(bad.value)
    with pytest.raises(RuleError) as unknown:
        parse_rules(rule_yaml("{flor: {metric: gpu.util}}"), "r.yml")
    assert "unknown condition 'flor' (did you mean 'floor'?)" in str(unknown.value)
    missing = "groups:\n  - name: g\n    rules:\n      - alert: R\n        for: 1m\n"
    with pytest.raises(RuleError, match=r"missing 'condition' \(.*floor\)"):
        parse_rules(missing, "r.yml")


def test_a_new_kind_joins_the_documented_table(floor_kind: Kind) -> None:
    assert "| `floor` | `metric`, `value`, `window` | the metric stayed below `value` for the whole `window` |" \
        in kinds_markdown()


def test_a_new_kind_combines_with_the_others(floor_kind: Kind) -> None:
    engine = engine_for("{all: [{floor: {metric: gpu.util, value: 10, window: 5s}}, "
                        "{threshold: {metric: gpu.mem_used_percent, op: '>=', value: 70}}]}")
    held = states_over(engine, [snap(t, [gpu(util=2.0, mem=80.0)]) for t in range(0, 8)])
    assert held[-1] == "firing"

