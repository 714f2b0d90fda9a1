"""What a cluster gets fills both dashboards: the rules of the kube-prometheus-stack overlay, taken from its
rendered PrometheusRule objects as the Operator hands them to Prometheus, loaded by a real Prometheus that
scrapes a real daemon replaying the bundled recording, give data to every panel of ``gpuwatch.json`` and of
``gpuwatch-efficiency.json`` (the efficiency panels read recording rules: an overlay without them leaves
half of that dashboard empty)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from daemon.test_prometheus import Processes, free_port, poll, procs  # noqa: F401 (procs is a fixture)
from tools import require_tool

from deploy import test_grafana as overview
from deploy import test_grafana_efficiency as efficiency
from deploy.kustomize import overlay
from gpuwatch.data import bundled_recording

OVERLAY = "kube-prometheus-stack"


def overlay_rule_groups(name: str) -> list[dict[str, Any]]:
    """Every rule group of the overlay's PrometheusRule objects (what the Operator writes into Prometheus's
    rule files), each evaluated every second here so a test sees its data soon."""
    groups = [dict(g) for doc in overlay(name) if doc["kind"] == "PrometheusRule" for g in doc["spec"]["groups"]]
    for group in groups:
        group["interval"] = "1s"
    return groups


def recorded(groups: list[dict[str, Any]]) -> set[str]:
    return {r["record"] for g in groups for r in g["rules"] if "record" in r}


def test_every_series_a_dashboard_reads_from_a_recording_rule_is_recorded_by_the_overlay() -> None:
    groups = overlay_rule_groups(OVERLAY)
    queries = [*overview.panel_queries(json.loads(overview.DASHBOARD.read_text())), *efficiency.panel_queries()]
    wanted = {n for _, e in queries for n in re.findall(r"\b[a-z_]+:gpuwatch_[a-z0-9_]+:[a-z0-9_]+", e)}
    assert wanted, "the efficiency dashboard reads recording rules"
    missing = wanted - recorded(groups)
    assert not missing, f"read by a dashboard, recorded by no rule of {OVERLAY}: {sorted(missing)}"
    assert any("alert" in r for g in groups for r in g["rules"])  # and the alerts are there too


@pytest.mark.slow
def test_both_dashboards_fill_from_the_overlays_rules_in_a_real_prometheus(tmp_path: Path,
                                                                         procs: Processes) -> None:  # noqa: F811
    prometheus = require_tool("prometheus")
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": overlay_rule_groups(OVERLAY)}, sort_keys=False))
    done = subprocess.run([require_tool("promtool"), "check", "rules", str(rules)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    gw, prom = free_port(), free_port()
    (tmp_path / "gpuwatch.toml").write_text('[exporter]\ndiagnosis_interval = "1s"\n')
    procs.start([sys.executable, "-m", "gpuwatch", "daemon", "--replay", str(bundled_recording()), "--speed", "5",
                 "--loop", "--config", str(tmp_path / "gpuwatch.toml"), "--listen", f"127.0.0.1:{gw}",
                 "--state-dir", str(tmp_path / "gw")], tmp_path / "gw.log")
    (tmp_path / "prom.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": [str(rules)],
        "scrape_configs": [{"job_name": "gpuwatch", "static_configs": [{"targets": [f"127.0.0.1:{gw}"]}]}]}))
    procs.start([prometheus, f"--config.file={tmp_path / 'prom.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prom}"], tmp_path / "prom.log")
    poll(lambda: requests.get(f"http://127.0.0.1:{prom}/-/ready", timeout=5).ok, 60, "Prometheus to be ready")

    def has_data(expr: str) -> bool:
        body = requests.get(f"http://127.0.0.1:{prom}/api/v1/query", params={"query": expr, "time": time.time()},
                            timeout=5).json()
        assert body["status"] == "success", (expr, body)
        return bool(body["data"]["result"])

    # every panel of both dashboards, but for the one the overview documents empty on this recording (NVLink)
    pending = {overview.resolved(e): f"gpuwatch.json: {t}"
               for t, e in overview.panel_queries(json.loads(overview.DASHBOARD.read_text()))
               if overview.absent(t, "gpuwatch") is None}
    pending |= {efficiency.resolved(e): f"gpuwatch-efficiency.json: {t}" for t, e in efficiency.panel_queries()}
    deadline = time.monotonic() + 150
    while pending and time.monotonic() < deadline:
        for expr in list(pending):
            if has_data(expr):
                del pending[expr]
        time.sleep(1)
    log = (tmp_path / "gw.log").read_text(errors="replace")[-2000:]
    assert not pending, f"panels without data: {sorted(set(pending.values()))}\ndaemon log: {log}"


def test_the_committed_efficiency_prometheusrule_is_the_export() -> None:
    from gpuwatch.cli.rules import prometheus_rule
    from gpuwatch.efficiency.recording_rules import rule_file

    committed = overview.ROOT / "deploy/kubernetes/components/prometheus-operator/prometheusrule-efficiency.yaml"
    assert committed.read_text() == prometheus_rule(rule_file(), name="gpuwatch-efficiency"), (
        f"regenerate: gpuwatch rules export --recording --format kubernetes -o {committed}")
