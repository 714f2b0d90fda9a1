"""The "GPU efficiency" dashboard and the efficiency recording rules against a real Prometheus scraping a
real daemon (replaying the bundled H200 recording): the committed rule file is the current export and
promtool's unit tests pass, every panel query and every recorded series returns data, and the lost
GPU-time Prometheus sees is on the cause the daemon's own roll-ups name."""

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

from gpuwatch.data import bundled_recording
from gpuwatch.efficiency.recording_rules import RULES, rule_file
from gpuwatch.model.causes import CAUSES
from gpuwatch.model.series import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "gpuwatch-efficiency.json"
RULE_FILE = ROOT / "alerts" / "prometheus" / "gpuwatch-efficiency-rules.yml"
VARIABLES = {"$instance": ".*", "$__range": "1h"}


def panel_queries() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]]


def resolved(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"unknown variable in {expr}"
    return expr


def test_the_committed_rules_are_the_export_and_pass_promtools_unit_tests() -> None:
    assert RULE_FILE.read_text() == rule_file(), "regenerate: gpuwatch rules export --recording -o " + str(RULE_FILE)
    promtool = require_tool("promtool")
    for args in (["check", "rules", str(RULE_FILE)], ["test", "rules", str(RULE_FILE.with_suffix(".test.yml"))]):
        done = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_names_only_served_series_and_recorded_rules() -> None:
    known = {s.name for s in CATALOGUE} | {r for r, _, _ in RULES}
    queries = panel_queries()
    assert len(queries) >= 8
    for title, expr in queries:
        for name in re.findall(r"\b[a-z_]*:?gpuwatch_[a-z0-9_:]+", expr):
            assert name in known, f"panel '{title}' queries {name}, which nothing serves or records"
    assert {r for r, _, _ in RULES} <= {n for _, e in queries for n in re.findall(r"[a-z_]+:[a-z_]+:[a-z0-9_]+", e)}


@pytest.mark.slow
def test_every_panel_and_recording_rule_has_data_from_a_real_prometheus(tmp_path: Path,
                                                                        procs: Processes) -> None:  # noqa: F811
    prometheus = require_tool("prometheus")
    gw, prom = free_port(), free_port()
    procs.start([sys.executable, "-m", "gpuwatch", "daemon", "--replay", str(bundled_recording()), "--speed", "5",
                 "--loop", "--listen", f"127.0.0.1:{gw}", "--state-dir", str(tmp_path / "gw")], tmp_path / "gw.log")
    rules = yaml.safe_load(RULE_FILE.read_text())
    for group in rules["groups"]:
        group["interval"] = "1s"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "prom.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": [str(tmp_path / "rules.yml")],
        "scrape_configs": [{"job_name": "gpuwatch", "static_configs": [{"targets": [f"127.0.0.1:{gw}"]}]}]}))
    procs.start([prometheus, f"--config.file={tmp_path / 'prom.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prom}"], tmp_path / "prom.log")
    api = f"http://127.0.0.1:{prom}/api/v1"
    poll(lambda: requests.get(f"http://127.0.0.1:{prom}/-/ready", timeout=5).ok, 60, "Prometheus to be ready")

    def result(expr: str) -> list[Any]:
        body = requests.get(f"{api}/query", params={"query": expr, "time": time.time()}, timeout=5).json()
        assert body["status"] == "success", (expr, body)
        return list(body["data"]["result"])

    pending = {resolved(e): t for t, e in panel_queries()} | {r: r for r, _, _ in RULES}
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        for expr in list(pending):
            if result(expr):
                del pending[expr]
        time.sleep(1)
    assert not pending, f"without data: {sorted(set(pending.values()))}\n{(tmp_path / 'gw.log').read_text()[-2000:]}"
    causes = {s["metric"]["cause"] for s in result("instance_gpu_cause:gpuwatch_gpu_lost_seconds:rate5m")}
    assert causes <= set(CAUSES)
    # the daemon's own roll-ups and Prometheus agree on the biggest cause of the recording's lost time, once
    # two minutes of it are accounted (for its first 10 s the server holds the GPU idle before its load starts,
    # which the doctor leaves unexplained: checked too early, that part can still be the biggest)
    poll(lambda: sum(float(s["value"][1]) for s in result('gpuwatch_gpu_seconds_total{state="observed"}')) >= 120,
         90, "two minutes of the recording to be accounted")
    rollup = requests.get(f"http://127.0.0.1:{gw}/api/v1/efficiency", timeout=5).json()
    by_cause: dict[str, float] = {}
    for row in rollup["lost"]:
        by_cause[row["cause"]] = by_cause.get(row["cause"], 0.0) + row["seconds"]
    prom_lost = {s["metric"]["cause"]: float(s["value"][1])
                 for s in result("sum by (cause) (gpuwatch_gpu_lost_seconds_total)")}
    assert max(by_cause, key=by_cause.__getitem__) == max(prom_lost, key=prom_lost.__getitem__) == "input_cpu_bound"
