"""Export to Prometheus: each condition's PromQL, what cannot be exported and why, the committed rule file
kept up to date, and promtool's verdict on it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tools import require_tool

from gpuwatch.alerts import DEFAULT_RULES, load_rules, parse_rules
from gpuwatch.alerts.export import export_prometheus, to_promql
from gpuwatch.alerts.promql import Unexpressible

PROM_DIR = Path(__file__).resolve().parents[2] / "alerts" / "prometheus"
GENERATED = PROM_DIR / "gpuwatch-rules.yml"


def cond(text: str) -> object:
    return parse_rules(f"groups:\n- name: g\n  rules:\n  - alert: R\n    condition: {text}\n").rules[0].condition


PROMQL = [
    ('{threshold: {metric: gpu.util, op: "<", value: 30}}', "gpuwatch_gpu_utilization_ratio < 0.3"),
    ('{threshold: {metric: gpu.mem_used_bytes, op: ">", value: 1e9}}', "gpuwatch_gpu_memory_used_bytes > 1000000000"),
    ('{threshold: {metric: gpu.util, op: "<", value: 30, avg: 2m}}',
     "avg_over_time(gpuwatch_gpu_utilization_ratio[2m]) < 0.3"),
    ('{threshold: {metric: gpu.sm_active, op: ">", value: 85, avg: 30m, quantile: 0.9}}',
     "quantile_over_time(0.9, gpuwatch_gpu_sm_active_ratio[30m]) > 0.85"),
    ('{threshold: {metric: gpu.sm_clock_mhz, op: "<", value: 1000}}', "gpuwatch_gpu_sm_clock_hertz < 1000000000"),
    ('{threshold: {metric: gpu.pcie_rx_bytes_s, op: ">", value: 1e9}}',
     "rate(gpuwatch_gpu_pcie_receive_bytes_total[1m]) > 1000000000"),  # a byte counter is read through rate()
    ('{threshold: {metric: process.io_read_bytes_s, op: ">", value: 5e8, avg: 5m}}',
     "rate(gpuwatch_process_io_read_bytes_total[5m]) > 500000000"),
    ('{threshold: {metric: gpu.ecc_uncorrected, op: ">", value: 0}}', "gpuwatch_gpu_ecc_uncorrected_errors_total > 0"),
    ('{all: [{threshold: {metric: gpu.mem_used_percent, op: ">=", value: 70}}, '
     '{threshold: {metric: gpu.util, op: "<", value: 30}}]}',
     "gpuwatch_gpu_memory_used_ratio >= 0.7 and gpuwatch_gpu_utilization_ratio < 0.3"),
    ('{all: [{threshold: {metric: gpu.util, op: "<", value: 50}}, '
     '{threshold: {metric: process.top_thread_cpu_percent, op: ">=", value: 90}}]}',
     "gpuwatch_process_top_thread_cpu_usage_ratio >= 0.9 and on (instance, gpu) gpuwatch_gpu_utilization_ratio < 0.5"),
    ('{any: [{threshold: {metric: gpu.util, op: ">", value: 90}}, {all: ['
     '{threshold: {metric: gpu.temperature_c, op: ">", value: 80}}, '
     '{threshold: {metric: gpu.power_w, op: ">", value: 600}}]}]}',
     "gpuwatch_gpu_utilization_ratio > 0.9 or "
     "(gpuwatch_gpu_temperature_celsius > 80 and gpuwatch_gpu_power_watts > 600)"),
    ('{all: [{threshold: {metric: gpu.memory_temperature_c, op: ">=", value: 90}}, '
     '{threshold: {metric: gpu.util, op: ">", value: 50}}]}',
     # a health series carries the same labels as every GPU series (no hostname on any): a plain "and" joins
     "gpuwatch_gpu_memory_temperature_celsius >= 90 and gpuwatch_gpu_utilization_ratio > 0.5"),
    ('{all: [{threshold: {metric: process.cpu_percent, op: ">", value: 90}}, '
     '{threshold: {metric: gpu.xid_recent, op: ">", value: 0}}]}',
     "gpuwatch_process_cpu_usage_ratio > 0.9 and on (instance, gpu) gpuwatch_gpu_recent_xid > 0"),
    ('{jitter: {metric: gpu.mem_used_percent, rise: 20, window: 5m, fall: 10}}',
     "(max_over_time(gpuwatch_gpu_memory_used_ratio[5m]) - gpuwatch_gpu_memory_used_ratio) >= 0.1 and "
     "(max_over_time(gpuwatch_gpu_memory_used_ratio[5m]) - gpuwatch_gpu_memory_used_ratio offset 5m) >= 0.2"),
    ('{volatility: {metric: gpu.mem_used_percent, stddev: 10, window: 10m}}',
     "stddev_over_time(gpuwatch_gpu_memory_used_ratio[5m]) >= 0.1 and "
     "stddev_over_time(gpuwatch_gpu_memory_used_ratio[5m] offset 5m) >= 0.1"),
    ('{flapping: {metric: gpu.util, op: ">=", value: 50, window: 10m, high: 40}}',
     "(changes((gpuwatch_gpu_utilization_ratio >= bool 0.5)[10m:]) / "
     "(count_over_time((gpuwatch_gpu_utilization_ratio >= bool 0.5)[10m:]) - 1) >= 0.4) "
     "and gpuwatch_gpu_utilization_ratio offset 10m"),
    ('{throttle: {reasons: [power_cap, hw_thermal], percent: 50, window: 5m}}',
     '(avg_over_time((max without (reason) (gpuwatch_gpu_clock_event_active{reason=~"hw_thermal|power_cap"}))[5m:])'
     ' >= 0.5) and max without (reason) (gpuwatch_gpu_clock_event_active{reason=~"hw_thermal|power_cap"} offset 5m)'),
    ("{stale: {source: dcgm}}", 'gpuwatch_source_up{source=~"dcgm"} == 0'),
    ("{stale: {}}", "gpuwatch_source_up == 0"),
]


@pytest.mark.parametrize(("condition", "expected"), PROMQL, ids=[p[0][:60] for p in PROMQL])
def test_each_condition_has_a_faithful_promql(condition: str, expected: str) -> None:
    assert to_promql(cond(condition)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("condition", "why"), [
    ('{threshold: {metric: gpu.util, op: ">", value: 90, clear: 80}}', "'clear' level is hysteresis"),
    ('{flapping: {metric: gpu.util, op: ">=", value: 50, window: 10m, high: 40, low: 20}}', "'low' threshold"),
    ('{threshold: {metric: gpu.sm_clock_percent, op: "<", value: 50}}', "has no Prometheus series"),
    ('{all: [{threshold: {metric: gpu.util, op: ">", value: 1, clear: 0}}]}', "hysteresis"),
    ('{volatility: {metric: process.io_write_bytes_s, stddev: 1e6, window: 5m}}', "exported as a counter of bytes"),
])
def test_what_promql_cannot_express_on_its_own_is_refused_with_the_reason(condition: str, why: str) -> None:
    with pytest.raises(Unexpressible, match=why):
        to_promql(cond(condition))  # type: ignore[arg-type]


def test_hysteresis_holds_through_the_rules_own_alerts_state() -> None:
    text = ("groups:\n- name: g\n  rules:\n  - alert: Idle\n    condition: {all: ["
            "{threshold: {metric: gpu.mem_used_percent, op: '>=', value: 70}}, "
            "{threshold: {metric: gpu.util, op: '<', value: 30, clear: 50}}]}\n"
            "    keep_firing_for: 1m\n    labels: {severity: warning, team: ml}\n")
    export = export_prometheus(parse_rules(text))
    assert export.skipped == []
    assert ("expr: gpuwatch_gpu_memory_used_ratio >= 0.7 and (gpuwatch_gpu_utilization_ratio < 0.3 or "
            "(gpuwatch_gpu_utilization_ratio < 0.5 and ignoring (alertname, alertstate, severity, team) "
            'ALERTS{alertname="Idle"}))') in export.text


def test_subqueries_use_the_group_interval_as_step() -> None:
    rules = parse_rules("groups:\n- name: g\n  interval: 15s\n  rules:\n  - alert: R\n"
                        "    condition: {throttle: {percent: 50, window: 5m}}\n")
    assert "[5m:15s]" in export_prometheus(rules).text
    assert "interval: 15s" in export_prometheus(rules).text


def test_export_lists_skipped_rules_with_reasons_and_translates_value_templates() -> None:
    rules = parse_rules(
        "groups:\n- name: g\n  rules:\n"
        "  - alert: Hot\n"
        "    condition: {all: [{threshold: {metric: gpu.sm_clock_percent, op: '<', value: 50}}]}\n"
        "  - alert: Full\n    condition: {threshold: {metric: gpu.mem_used_bytes, op: '>', value: 1e9}}\n"
        "    annotations: {summary: 'GPU {{ $labels.gpu }} uses {{ $value }}'}\n"
        "  - alert: Gone\n    condition: {stale: {}}\n    annotations: {summary: 'stale {{ $value }}'}\n",
        "r.yml")
    export = export_prometheus(rules)
    assert export.exported == ["Full"]
    assert [(name, origin) for name, origin, _ in export.skipped] == [("Hot", "r.yml:4"), ("Gone", "r.yml:9")]
    assert "uses {{ $value | humanize1024 }}B" in export.text
    assert "# Not exported: Hot (r.yml:4): metric 'gpu.sm_clock_percent' has no Prometheus series" in export.text


def test_committed_rule_file_is_what_export_generates() -> None:
    expected = export_prometheus(load_rules([DEFAULT_RULES])).text
    assert GENERATED.read_text(encoding="utf-8") == expected, (
        "alerts/prometheus/gpuwatch-rules.yml is out of date: run "
        "'gpuwatch rules export --format prometheus -o alerts/prometheus/gpuwatch-rules.yml'")


def test_promtool_accepts_the_generated_rules() -> None:
    promtool = require_tool("promtool")
    res = subprocess.run([promtool, "check", "rules", str(GENERATED)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("test_file", sorted(PROM_DIR.glob("*.test.yml")), ids=lambda p: Path(p).name)
def test_promtool_unit_tests_pass(test_file: Path) -> None:
    promtool = require_tool("promtool")
    res = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_byte_rate_threshold_fires_in_promtool_on_the_counter_the_exporter_serves(tmp_path: Path) -> None:
    """The exporter serves PCIe bytes as a running total; the exported rule reads its rate back."""
    promtool = require_tool("promtool")
    rules = parse_rules('groups:\n- name: g\n  rules:\n  - alert: PcieBusy\n    condition: {threshold: '
                        '{metric: gpu.pcie_rx_bytes_s, op: ">", value: 5e8}}\n    for: 2m\n', "r.yml")
    (tmp_path / "rules.yml").write_text(export_prometheus(rules).text)
    # 6e10 bytes a minute (1 GB/s) for 5 minutes, then idle: fires after `for`, ends once the rate falls.
    (tmp_path / "test.yml").write_text("""\
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'gpuwatch_gpu_pcie_receive_bytes_total{instance="n:19464",gpu="0"}'
        values: '0+60000000000x5 300000000000x5'
    alert_rule_test:
      - {eval_time: 2m, alertname: PcieBusy, exp_alerts: []}
      - eval_time: 4m
        alertname: PcieBusy
        exp_alerts: [{exp_labels: {instance: "n:19464", gpu: "0"}}]
      - {eval_time: 8m, alertname: PcieBusy, exp_alerts: []}
""")
    res = subprocess.run([promtool, "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
