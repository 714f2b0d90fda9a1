"""Parity: for the same input series, the local engine and Prometheus (promtool) agree on which alerts fire
at which evaluation time, with the same labels and annotation text.

Series are generated (seeded), turned into Snapshots for the engine and into promtool ``input_series``
over the exporter's metric names; the engine's firing alerts at every minute become the ``exp_alerts`` of a
promtool unit test, and promtool must pass it. Samples lie on the evaluation grid (1 per minute), so
agreement is expected at every evaluation; values avoid exact ties with thresholds, where float rounding
of percent vs ratio could go either way.
"""

from __future__ import annotations

import json
import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tools import require_tool

from alerts.build import GIB, T0
from gpuwatch.alerts import AlertEngine, RuleSet, parse_rules
from gpuwatch.alerts.export import export_prometheus
from gpuwatch.model.clock_events import NAME_TO_BIT
from gpuwatch.model.metrics import METRICS, read_metric
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Snapshot, SourceStatus

STEP = 60.0
MINUTES = 40
SCRAPE = {"instance": "node-1", "job": "gpuwatch"}  # a setup that relabels instance to the host name

RULES = """
groups:
  - name: parity
    rules:
      - alert: MemoryHeldIdle
        condition: {all: [{threshold: {metric: gpu.mem_used_percent, op: ">=", value: 70}},
                          {threshold: {metric: gpu.util, op: "<", value: 30, clear: 50}}]}
        for: 3m
        keep_firing_for: 2m
        labels: {severity: warning}
        annotations: {summary: "GPU {{ $labels.gpu }} ({{ $labels.name }}) holds {{ $value }}"}
      - alert: ThreadCpuBound
        condition: {all: [{threshold: {metric: gpu.util, op: "<", value: 50}},
                          {threshold: {metric: process.top_thread_cpu_percent, op: ">=", value: 90}}]}
        for: 1m
        annotations: {summary: "pid {{ $labels.pid }} {{ $labels.command }} at {{ $value }}"}
      - alert: BusyOrHot
        condition: {any: [{threshold: {metric: gpu.util, op: ">", value: 85}},
                          {threshold: {metric: gpu.temperature_c, op: ">", value: 80}}]}
        for: 2m
        annotations: {summary: "GPU {{ $labels.gpu }} busy or hot"}
      - alert: MemorySpike
        condition: {jitter: {metric: gpu.mem_used_percent, rise: 20.25, window: 5m, fall: 15.25}}
        keep_firing_for: 1m
        annotations: {summary: "fell {{ $value }}"}
      - alert: MemoryVolatile
        condition: {volatility: {metric: gpu.mem_used_percent, stddev: 12.3, window: 10m}}
        for: 2m
        annotations: {summary: "sd {{ $value }}"}
      - alert: MemoryClimbing
        condition: {climb: {metric: gpu.mem_used_percent, window: 5m, limit: 100.25, within: 30m, rise: 10.25}}
        for: 1m
        annotations: {summary: "climbed {{ $value }}"}
      - alert: UtilFlapping
        condition: {flapping: {metric: gpu.util, op: ">=", value: 50, window: 10m, high: 35, low: 15}}
        keep_firing_for: 1m
        annotations: {summary: "{{ $value }} changes"}
      - alert: Throttled
        condition: {throttle: {reasons: [power_cap, hw_thermal], percent: 45, window: 5m}}
        keep_firing_for: 1m
        annotations: {summary: "GPU {{ $labels.gpu }} held down {{ $value }}"}
      - alert: Stale
        condition: {stale: {}}
        for: 1m
        annotations: {summary: "{{ $labels.source }} is down"}
      - alert: UtilLowOnAverage
        condition: {threshold: {metric: gpu.util, op: "<", value: 40.3, avg: 3m}}
        for: 1m
        annotations: {summary: "mean {{ $value }}"}
      - alert: UtilHighNinetiethPercentile
        condition: {threshold: {metric: gpu.util, op: ">", value: 70.3, avg: 4m, quantile: 0.9}}
        for: 1m
        annotations: {summary: "p90 {{ $value }}"}
      - alert: HotWithHysteresis
        condition: {threshold: {metric: gpu.temperature_c, op: ">=", value: 82, clear: 74}}
        for: 1m
        labels: {severity: critical}
        annotations: {summary: "{{ $value }}"}
      - alert: PowerHigh
        condition: {threshold: {metric: gpu.power_w, op: ">", value: 600}}
        annotations: {summary: "{{ $value }} drawn"}
"""


@dataclass
class Trace:
    snapshots: list[Snapshot] = field(default_factory=list)


def _walk(rng: random.Random, lo: float, hi: float, jump: float) -> list[float]:
    """A random walk on a half-integer grid (x.5) so no value ties an integer threshold."""
    v, out = rng.uniform(lo, hi), []
    for _ in range(MINUTES):
        if rng.random() < 0.15:
            v = rng.uniform(lo, hi)
        v = min(hi, max(lo, v + rng.uniform(-jump, jump)))
        out.append(int(v) + 0.5)
    return out


def generate(seed: int) -> list[Snapshot]:
    rng = random.Random(seed)
    utils = [_walk(rng, 0, 99, 25) for _ in range(2)]
    mems = [_walk(rng, 20, 95, 10) for _ in range(2)]
    for m in mems:  # a few one-minute spikes for the jitter rule
        for _ in range(2):
            i = rng.randrange(6, MINUTES - 1)
            m[i] = min(99.5, m[i] + 35)
    temps = _walk(rng, 60, 90, 5)
    power = _walk(rng, 300, 699, 80)
    throttled = [rng.random() < 0.45 for _ in range(MINUTES)]
    proc_alive = range(rng.randrange(0, 10), rng.randrange(20, MINUTES))
    thread_cpu = _walk(rng, 60, 99, 20)
    dcgm_down = set(range(s := rng.randrange(5, 30), s + rng.randrange(1, 6)))
    snaps = []
    for k in range(MINUTES):
        gpus = tuple(GpuSample(
            index=i, uuid=f"GPU-{i:04d}", name="NVIDIA H200", gpu_util=utils[i][k],
            mem_used_bytes=round(mems[i][k] * GIB), mem_total_bytes=100 * GIB,
            temperature_c=temps[k] if i == 0 else 50.5, power_w=power[k] if i == 1 else 100.5,
            clock_event_mask=(NAME_TO_BIT["power_cap"] if throttled[k] else 0) if i == 0 else NAME_TO_BIT["gpu_idle"],
        ) for i in range(2))
        procs = (ProcessSample(pid=4711, gpu_index=0, user="svc", name="python3",
                               top_thread_cpu_percent=thread_cpu[k]),) if k in proc_alive else ()
        sources = (SourceStatus("nvml"), SourceStatus("dcgm", "stale" if k in dcgm_down else "ok"))
        snaps.append(Snapshot(time=T0 + k * STEP, host=HostSample("node-1"), gpus=gpus, processes=procs,
                              sources=sources))
    return snaps


def _series_name(name: str, labels: dict[str, str]) -> str:
    body = ",".join(f"{k}={json.dumps(v)}" for k, v in {**labels, **SCRAPE}.items())
    return f"{name}{{{body}}}"


def input_series(snaps: list[Snapshot]) -> list[dict[str, str]]:
    """The exporter's view of the snapshots: one promtool series per metric and label set; 'stale' where
    the exporter stopped exporting it (a process that exited)."""
    series: dict[str, list[str]] = {}

    def put(name: str, labels: dict[str, str], k: int, value: float) -> None:
        series.setdefault(_series_name(name, labels), ["_"] * len(snaps))[k] = repr(float(value))

    for k, s in enumerate(snaps):
        for g in s.gpus:
            labels = {"gpu": str(g.index), "uuid": g.uuid, "name": g.name or ""}
            for key in ("gpu.util", "gpu.mem_used_percent", "gpu.temperature_c", "gpu.power_w"):
                value = read_metric(key, g)
                assert value is not None
                put(METRICS[key].prom_name or "", labels, k, value * METRICS[key].prom_scale)
            for reason, bit in NAME_TO_BIT.items():
                put("gpuwatch_gpu_clock_event_active", {**labels, "reason": reason}, k,
                    1.0 if (g.clock_event_mask or 0) & bit else 0.0)
        for p in s.processes:
            labels = {"pid": str(p.pid), "gpu": str(p.gpu_index), "user": p.user or "", "command": p.name or ""}
            spec = METRICS["process.top_thread_cpu_percent"]
            put(spec.prom_name or "", labels, k, (p.top_thread_cpu_percent or 0) * spec.prom_scale)
        for src in s.sources:
            put("gpuwatch_source_up", {"source": src.name}, k, 1.0 if src.state == "ok" else 0.0)
    out = []
    for name, values in series.items():
        last = max(i for i, v in enumerate(values) if v != "_")
        if last < len(values) - 1:
            values[last + 1] = "stale"
        out.append({"series": name, "values": " ".join(values)})
    return out


def engine_expectations(rules: RuleSet, snaps: list[Snapshot]) -> tuple[list[dict[str, object]], set[str]]:
    """promtool alert_rule_test entries from what the engine has firing at every evaluation."""
    engine, tests, fired = AlertEngine(rules), [], set()
    for k, s in enumerate(snaps):
        engine.evaluate(s)
        firing = [a for a in engine.alerts() if a.state == "firing"]
        fired.update(a.name for a in firing)
        for rule in rules.rules:
            # The series carry no hostname: in Prometheus the alert has the scrape's instance in its place.
            exp = [{"exp_labels": {**{n: v for n, v in a.labels.items() if n not in ("alertname", "hostname")},
                                   **SCRAPE},
                    "exp_annotations": a.annotations} for a in firing if a.name == rule.name]
            tests.append({"eval_time": f"{k}m", "alertname": rule.name, "exp_alerts": exp})
    return tests, fired


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_engine_and_promtool_agree_on_every_evaluation(seed: int, tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    rules = parse_rules(RULES, "parity.yml")
    export = export_prometheus(rules)
    assert export.skipped == []
    (tmp_path / "rules.yml").write_text(export.text)
    snaps = generate(seed)
    tests, fired = engine_expectations(rules, snaps)
    assert len(fired) >= 4, f"seed {seed} exercises too few rules: {sorted(fired)}"
    spec = {"rule_files": ["rules.yml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": input_series(snaps), "alert_rule_test": tests}]}
    (tmp_path / "test.yml").write_text(json.dumps(spec, indent=1))  # JSON is YAML
    res = subprocess.run([promtool, "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]


def test_the_seeds_together_make_every_rule_fire() -> None:
    rules = parse_rules(RULES, "parity.yml")
    fired = set().union(*(engine_expectations(rules, generate(seed))[1] for seed in (1, 2, 3, 4)))
    assert fired == {r.name for r in rules.rules}
