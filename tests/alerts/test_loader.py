"""Rule files: the shipped ones load; every mistake is reported as ``file:line: rule 'X': what``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwatch.alerts import DEFAULT_RULES, RuleError, load_rules, parse_rules
from gpuwatch.alerts.rules import AllOf, Threshold, Throttle
from gpuwatch.model.durations import format_duration

HEAD = "groups:\n  - name: g\n    rules:\n      - alert: R\n"  # the rule starts on line 4


def problems(body: str) -> list[str]:
    with pytest.raises(RuleError) as info:
        parse_rules(HEAD + body, "r.yml")
    return info.value.errors


BAD = [
    ("unknown metric, with the nearest names",
     "        condition: {threshold: {metric: gpu.utl, op: '<', value: 30}}\n",
     "r.yml:5: rule 'R': threshold.metric: unknown metric 'gpu.utl' (did you mean gpu.util"),
    ("bad duration", "        condition: {stale: {}}\n        for: 5 minutes\n",
     "r.yml:6: rule 'R': 'for': '5 minutes' is not a duration; write e.g. 30s, 5m, 1h30m or a number of seconds"),
    ("unknown rule key, with a suggestion", "        condition: {stale: {}}\n        labeles: {a: b}\n",
     "r.yml:6: rule 'R': unknown key 'labeles' (did you mean 'labels'?)"),
    ("wrong type for a value", "        condition:\n          threshold: {metric: gpu.util, op: '<', value: low}\n",
     "r.yml:6: rule 'R': threshold.value: must be a number, got 'low'"),
    ("an unquoted YAML op is still checked", "        condition: {threshold: {metric: gpu.util, op: '=>', value: 1}}\n",
     "r.yml:5: rule 'R': threshold.op: '=>' is not a comparison"),
    ("unknown condition kind", "        condition: {treshold: {metric: gpu.util}}\n",
     "r.yml:5: rule 'R': unknown condition 'treshold' (did you mean 'threshold'?)"),
    ("missing field", "        condition:\n          jitter: {metric: gpu.util, window: 5m}\n",
     "r.yml:6: rule 'R': jitter: missing 'rise'"),
    ("missing condition", "        for: 1m\n", "r.yml:4: rule 'R': missing 'condition'"),
    ("PromQL expr is not the format", "        expr: up == 0\n",
     "r.yml:5: rule 'R': PromQL 'expr' is not supported: write a structured 'condition'"),
    ("clear on the wrong side", "        condition: {threshold: {metric: gpu.util, op: '>', value: 90, clear: 95}}\n",
     "r.yml:5: rule 'R': threshold: 'clear' must be at or below 'value'"),
    ("percent out of range", "        condition: {throttle: {percent: 150, window: 5m}}\n",
     "r.yml:5: rule 'R': throttle.percent: is a percentage, 0 to 100, got 150"),
    ("unknown clock-event reason", "        condition: {throttle: {reasons: [power_capp], percent: 5, window: 5m}}\n",
     "r.yml:5: rule 'R': throttle.reasons: unknown clock-event reason 'power_capp' (did you mean 'power_cap'?)"),
    ("template field not supported", "        condition: {stale: {}}\n        annotations:\n"
     "          summary: '{{ $labels.gpu | toUpper }}'\n",
     "r.yml:7: rule 'R': annotations.summary: unsupported template field"),
    ("templates in labels", "        condition: {stale: {}}\n        labels: {severity: '{{ $value }}'}\n",
     "r.yml:6: rule 'R': labels.severity: labels cannot use templates"),
    ("label value not a string", "        condition: {stale: {}}\n        labels: {severity: [a]}\n",
     "r.yml:6: rule 'R': labels.severity must be a string"),
    ("'any' over different things",
     "        condition:\n          any:\n            - threshold: {metric: gpu.util, op: '<', value: 1}\n"
     "            - threshold: {metric: process.cpu_percent, op: '>', value: 1}\n",
     "r.yml:6: rule 'R': 'any' needs conditions about the same thing"),
    ("stale mixed into a compound",
     "        condition:\n          all: [{stale: {}}, {threshold: {metric: gpu.util, op: '<', value: 1}}]\n",
     "r.yml:6: rule 'R': 'stale' cannot be combined"),
    ("$value of mixed units",
     "        condition:\n          any: [{threshold: {metric: gpu.util, op: '>', value: 1}},"
     " {threshold: {metric: gpu.power_w, op: '>', value: 1}}]\n        annotations: {summary: '{{ $value }}'}\n",
     "r.yml:7: rule 'R': {{ $value }} is ambiguous: 'any' conditions report values in different units"),
    ("reserved label", "        condition: {stale: {}}\n        labels: {alertname: X}\n",
     "r.yml:6: rule 'R': label 'alertname' is reserved"),
    ("hysteresis on a coarser part of a compound",
     "        condition:\n          all:\n"
     "            - threshold: {metric: process.top_thread_cpu_percent, op: '>=', value: 90}\n"
     "            - threshold: {metric: gpu.util, op: '<', value: 30, clear: 50}\n",
     "r.yml:5: rule 'R': hysteresis on 'gpu.util' holds while the alert is active, so it must be about the "
     "alert's own process, not its gpu"),
    ("key given twice", "        condition: {stale: {}}\n        for: 1m\n        for: 2m\n",
     "r.yml:7: rule 'R': key 'for' appears twice"),
    ("a window that would hold years of samples",
     "        condition:\n          jitter: {metric: gpu.util, rise: 10, window: 99999999999d}\n",
     "r.yml:6: rule 'R': jitter.window: is 99999999999d, longer than the 1d a rule may look back"),
    ("a mean over more than a day",
     "        condition:\n          threshold: {metric: gpu.util, op: '<', value: 10, avg: 25h}\n",
     "r.yml:6: rule 'R': threshold.avg: is 1d1h, longer than the 1d a rule may look back"),
]


@pytest.mark.parametrize(("case", "body", "expected"), BAD, ids=[b[0] for b in BAD])
def test_each_mistake_names_file_line_rule_and_problem(case: str, body: str, expected: str) -> None:
    found = problems(body)
    assert any(p.startswith(expected) for p in found), found


def test_all_problems_are_reported_at_once_in_line_order() -> None:
    text = (HEAD + "        condition: {threshold: {metric: nope, op: '<', value: 1}}\n        for: x\n"
            "      - alert: S\n        condition: {stale: {}}\n        keep_firing_for: -1m\n")
    with pytest.raises(RuleError) as info:
        parse_rules(text, "r.yml")
    lines = [int(e.split(":")[1]) for e in info.value.errors]
    assert lines == sorted(lines) and len(lines) == 3


@pytest.mark.parametrize(("text", "line"), [
    ("groups:\n  - name: g\n    rules: [\n", 4),
    ("groups: {a: 1}\n", 1),
    ("- just a list\n", 1),
])
def test_malformed_files_say_where(text: str, line: int) -> None:
    with pytest.raises(RuleError, match=rf"^r.yml:{line}: "):
        parse_rules(text, "r.yml")


def test_the_shipped_rules_load_with_every_required_rule() -> None:
    rules = load_rules([DEFAULT_RULES])
    names = {r.name for r in rules.rules}
    assert {"GpuMemoryHeldWhileIdle", "GpuUtilOverstatesWork", "GpuMemoryLeak", "GpuTensorCoresIdleUnderLoad",
            "GpuMemoryJitter", "GpuClockThrottled", "GpuwatchSourceStale", "ProcessThreadCpuBound"} <= names
    incident = rules.rule("GpuMemoryHeldWhileIdle")
    assert incident is not None and incident.for_s == 300
    assert isinstance(incident.condition, AllOf)
    assert incident.condition.conditions == (Threshold("gpu.mem_used_percent", ">=", 70),
                                             Threshold("gpu.util", "<", 30, clear=50))
    throttle = rules.rule("GpuClockThrottled")
    assert throttle is not None and isinstance(throttle.condition, Throttle)
    assert "gpu_idle" not in throttle.condition.reasons


def test_directories_load_their_yaml_files_and_names_must_be_unique(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text(HEAD + "        condition: {stale: {}}\n")
    (tmp_path / "b.yaml").write_text(HEAD.replace("name: g", "name: h") + "        condition: {stale: {}}\n")
    (tmp_path / "notes.txt").write_text("not rules")
    with pytest.raises(RuleError, match=r"b.yaml:4: rule 'R': the name is already used at .*a.yml:4"):
        load_rules([tmp_path])
    (tmp_path / "b.yaml").unlink()
    assert len(load_rules([tmp_path])) == 1
    with pytest.raises(RuleError, match="no such file"):
        load_rules([tmp_path / "missing.yml"])


def test_an_empty_file_is_an_empty_rule_set() -> None:
    assert len(parse_rules("", "e.yml")) == 0


@pytest.mark.parametrize(("seconds", "text"), [(300, "5m"), (90, "1m30s"), (0, "0s"), (0.25, "250ms"),
                                               (86400 + 3600, "1d1h")])
def test_durations_are_written_back_shortest(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_a_day_long_window_and_a_week_long_horizon_are_allowed() -> None:
    rules = parse_rules(HEAD + "        condition:\n          climb: {metric: gpu.mem_used_percent, window: 1d, "
                        "limit: 95, within: 7d}\n", "r.yml")
    climb = rules.groups[0].rules[0].condition
    assert (climb.window_s, climb.within_s) == (86_400.0, 604_800.0)
