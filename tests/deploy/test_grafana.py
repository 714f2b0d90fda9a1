"""The shipped Grafana dashboard against a real Prometheus: Prometheus scrapes a daemon replaying the bundled
H200 recording, and every panel's query (and every template variable's) returns data through Prometheus's
HTTP API, so no panel of deploy/grafana/gpuwatch.json comes up empty on a working install."""

from __future__ import annotations

import json
import re
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

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "gpuwatch.json"
#: What Grafana puts in for the dashboard's variables when "All" is chosen.
VARIABLES = {"$instance": ".*", "$gpu": ".*", "$__rate_interval": "1m"}


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel, rows' nested panels included."""
    out = []
    for panel in dashboard["panels"]:
        for p in [panel, *panel.get("panels", [])]:
            out += [(p["title"], t["expr"]) for t in p.get("targets", [])]
    return out


def resolved(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"unknown variable in {expr}"
    return expr


def test_the_dashboard_is_well_formed_and_names_only_catalogue_series() -> None:
    from gpuwatch.model.series import CATALOGUE

    dashboard = json.loads(DASHBOARD.read_text())
    queries = panel_queries(dashboard)
    assert len(queries) >= 15
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    known = {s.name for s in CATALOGUE}
    for title, expr in queries:
        for name in re.findall(r"\bgpuwatch_[a-z0-9_]+", expr):
            assert name in known, f"panel '{title}' queries {name}, which /metrics does not serve"


@pytest.mark.slow
def test_every_panel_query_returns_data_from_a_real_prometheus(tmp_path: Path, procs: Processes) -> None:  # noqa: F811
    prometheus = require_tool("prometheus")
    gw, prom = free_port(), free_port()
    (tmp_path / "gpuwatch.toml").write_text('[exporter]\ndiagnosis_interval = "1s"\n')
    procs.start([sys.executable, "-m", "gpuwatch", "daemon", "--replay", str(bundled_recording()), "--speed", "5",
                 "--loop", "--config", str(tmp_path / "gpuwatch.toml"), "--listen", f"127.0.0.1:{gw}",
                 "--state-dir", str(tmp_path / "gw")], tmp_path / "gw.log")
    (tmp_path / "prom.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "gpuwatch", "static_configs": [{"targets": [f"127.0.0.1:{gw}"]}]}]}))
    procs.start([prometheus, f"--config.file={tmp_path / 'prom.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prom}"], tmp_path / "prom.log")
    api = f"http://127.0.0.1:{prom}/api/v1"
    # Prometheus answers 503 until its TSDB is open; query only once it says it is ready.
    poll(lambda: requests.get(f"http://127.0.0.1:{prom}/-/ready", timeout=5).ok, 60, "Prometheus to be ready")

    def result(expr: str) -> list[Any]:
        try:
            body = requests.get(f"{api}/query", params={"query": expr, "time": time.time()}, timeout=5).json()
        except requests.ConnectionError:
            return []  # Prometheus still starting
        assert body["status"] == "success", (expr, body)
        return list(body["data"]["result"])

    dashboard = json.loads(DASHBOARD.read_text())
    pending = {expr: title for title, expr in panel_queries(dashboard)}
    deadline = time.monotonic() + 90
    while pending and time.monotonic() < deadline:
        for expr in list(pending):
            if result(resolved(expr)):
                del pending[expr]
        time.sleep(1)
    log = (tmp_path / "gw.log").read_text(errors="replace")[-2000:]
    assert not pending, f"panels without data: {sorted(set(pending.values()))}\ndaemon log: {log}"
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            match = re.fullmatch(r"label_values\((.*), (\w+)\)", var["definition"])
            assert match is not None, var["definition"]
            found = poll(lambda m=match: result(resolved(m.group(1))), 10, var["name"])
            assert all(s["metric"].get(match.group(2)) for s in found), var["name"]
