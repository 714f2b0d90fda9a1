"""The shipped Grafana dashboard against a real Prometheus, in every names mode of the exporter.

For each of ``[exporter] names = "gpuwatch" | "dcgm" | "both"``, Prometheus scrapes two daemons: one replaying
the bundled H200 recording, one replaying it with NVLink counters added (the bundled GPU has no NVLink peers).
Every panel query must return data for the bundled daemon, except the panels in :data:`ABSENT`, whose reason
the test checks; the NVLink panel must return data for the NVLink daemon wherever the mode serves NVLink. In
"both", each GPU query's dcgm-exporter half must agree with its gpuwatch half (the unit conversions)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests
import yaml
from daemon.test_prometheus import Processes, free_port, poll, procs  # noqa: F401 (procs is a fixture)
from tools import require_tool

from gpuwatch.data import bundled_recording
from gpuwatch.model.dcgm_names import DCGM_FIELDS

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "gpuwatch.json"
GENERATOR = ROOT / "scripts" / "grafana_dashboard.py"
MODES = ("gpuwatch", "dcgm", "both")
NVLINK = "NVLink traffic"


def _recording_has_nvlink(path: Path) -> bool:
    with gzip.open(path, "rt") as f:
        return any(g.get("health") and g["health"].get("nvlink_tx_bytes") is not None
                   for line in f for g in json.loads(line).get("gpus", []))


def _dcgm_names_serve_nvlink() -> bool:
    return any("NVLINK" in f.name for f in DCGM_FIELDS)


#: (panel, names mode or "*") -> why the panel is empty there, and the check that the reason still holds.
ABSENT: dict[tuple[str, str], tuple[str, Callable[[], bool]]] = {
    (NVLINK, "*"): ("the bundled recording is of one H200 without NVLink peers: it holds no NVLink counters",
                    lambda: not _recording_has_nvlink(bundled_recording())),
    (NVLINK, "dcgm"): ("gpuwatch serves no NVLink series under dcgm-exporter's names",
                       lambda: not _dcgm_names_serve_nvlink()),
}


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grafana_dashboard", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel, rows' nested panels included."""
    out = []
    for panel in dashboard["panels"]:
        for p in [panel, *panel.get("panels", [])]:
            out += [(p["title"], t["expr"]) for t in p.get("targets", [])]
    return out


def resolved(expr: str, instance: str = ".*") -> str:
    """``expr`` as Grafana sends it with "All" GPUs and the given host chosen."""
    for name, value in {"$instance": instance, "$gpu": ".*", "$__rate_interval": "1m"}.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"unknown variable in {expr}"
    return expr


def absent(title: str, mode: str) -> str | None:
    """Why ``title`` is documented empty for the bundled recording in ``mode`` (None: it must have data)."""
    for key in ((title, mode), (title, "*")):
        if key in ABSENT:
            return ABSENT[key][0]
    return None


def test_the_dashboard_is_the_generated_one() -> None:
    done = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_the_dashboard_is_well_formed_and_names_only_served_series() -> None:
    from gpuwatch.model.series import CATALOGUE, DCGM

    dashboard = json.loads(DASHBOARD.read_text())
    queries = panel_queries(dashboard)
    assert len(queries) >= 20
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    known = {s.name for s in CATALOGUE} | set(DCGM)
    for title, expr in queries:
        for name in re.findall(r"\b(?:gpuwatch_[a-z0-9_]+|DCGM_FI_[A-Z0-9_]+)", expr):
            assert name in known, f"panel '{title}' queries {name}, which /metrics does not serve"
    assert any(title == NVLINK for title, _ in queries)


def test_every_documented_absence_still_holds_and_is_said_on_the_panel() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    descriptions = {p["title"]: p.get("description", "") for p in dashboard["panels"]}
    for (title, mode), (why, holds) in ABSENT.items():
        assert holds(), f"'{title}' is documented empty ({why}), but that is no longer so: expect its data"
        if mode != "*":
            assert f'names = "{mode}"' in descriptions[title], f"'{title}' does not say it is empty under {mode}"


def _nvlink_recording(path: Path) -> Path:
    """The bundled recording with NVLink counters on its GPU: 18 links, 25 GB/s out and 20 GB/s in."""
    with gzip.open(bundled_recording(), "rt") as src, gzip.open(path, "wt") as dst:
        start = None
        for line in src:
            d = json.loads(line)
            for g in d.get("gpus", []):
                start = d["time"] if start is None else start
                elapsed = d["time"] - start
                g["health"] = {"nvlink_links": 18, "nvlink_links_up": 18,
                               "nvlink_tx_bytes": int(25e9 * elapsed), "nvlink_rx_bytes": int(20e9 * elapsed)}
            dst.write(json.dumps(d) + "\n")
    return path


class Stack:
    """Prometheus scraping a bundled-recording daemon and an NVLink-recording daemon, in one names mode."""

    def __init__(self, tmp_path: Path, procs: Processes, mode: str) -> None:  # noqa: F811
        prometheus = require_tool("prometheus")
        (tmp_path / "gpuwatch.toml").write_text(f'[exporter]\nnames = "{mode}"\ndiagnosis_interval = "1s"\n')
        nvlink = _nvlink_recording(tmp_path / "nvlink.ndjson.gz")
        self.instances: dict[str, str] = {}
        for name, recording in (("bundled", bundled_recording()), ("nvlink", nvlink)):
            port = free_port()
            self.instances[name] = f"127.0.0.1:{port}"
            procs.start([sys.executable, "-m", "gpuwatch", "daemon", "--replay", str(recording), "--speed", "5",
                         "--loop", "--config", str(tmp_path / "gpuwatch.toml"), "--listen", f"127.0.0.1:{port}",
                         "--state-dir", str(tmp_path / f"gw-{name}")], tmp_path / f"gw-{name}.log")
        prom = free_port()
        (tmp_path / "prom.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [{"job_name": "gpuwatch",
                                "static_configs": [{"targets": list(self.instances.values())}]}]}))
        procs.start([prometheus, f"--config.file={tmp_path / 'prom.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{prom}"], tmp_path / "prom.log")
        self.api = f"http://127.0.0.1:{prom}/api/v1"
        self.log = tmp_path / "gw-bundled.log"
        # Prometheus answers 503 until its TSDB is open; query only once it says it is ready.
        poll(lambda: requests.get(f"http://127.0.0.1:{prom}/-/ready", timeout=5).ok, 60, "Prometheus to be ready")

    def result(self, expr: str, at: float | None = None) -> list[Any]:
        try:
            body = requests.get(f"{self.api}/query", params={"query": expr, "time": str(at or time.time())},
                                timeout=5).json()
        except requests.ConnectionError:
            return []  # Prometheus still starting
        assert body["status"] == "success", (expr, body)
        return list(body["data"]["result"])

    def wait_for_data(self, queries: dict[str, str], instance: str, timeout: float) -> dict[str, str]:
        """The queries (expr -> panel title) still without data for ``instance`` after ``timeout`` s."""
        pending = dict(queries)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for expr in list(pending):
                if self.result(resolved(expr, instance)):
                    del pending[expr]
            time.sleep(1)
        return pending


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_panel_returns_data_from_a_real_prometheus(mode: str, tmp_path: Path, procs: Processes) -> None:  # noqa: F811
    stack = Stack(tmp_path, procs, mode)
    dashboard = json.loads(DASHBOARD.read_text())
    queries = panel_queries(dashboard)
    expected = {expr: title for title, expr in queries if absent(title, mode) is None}
    pending = stack.wait_for_data(expected, stack.instances["bundled"], 90)
    log = stack.log.read_text(errors="replace")[-2000:]
    assert not pending, f"names={mode}: panels without data: {sorted(set(pending.values()))}\ndaemon log: {log}"
    # the documented absences are real absences, not slow data
    for title, expr in queries:
        if absent(title, mode) is not None:
            assert stack.result(resolved(expr, stack.instances["bundled"])) == [], (mode, title)
    # NVLink: served under gpuwatch's names, absent (as documented) under dcgm-exporter's only
    nvlink = {expr: title for title, expr in queries if title == NVLINK}
    if (NVLINK, mode) in ABSENT:
        assert stack.wait_for_data(nvlink, stack.instances["nvlink"], 5) == nvlink
    else:
        assert not stack.wait_for_data(nvlink, stack.instances["nvlink"], 60), f"names={mode}: no NVLink data"
        transmit = next(expr for expr in nvlink if "transmit" in expr)
        # over a window the data fills (rate() over a window longer than the series scales the rate down)
        rate = poll(lambda: stack.result(resolved(transmit, stack.instances["nvlink"]).replace("[1m]", "[5s]")), 10,
                    "the NVLink rate")
        # 25 GB/s of recording time, replayed 5x faster: bytes per second, not bits or MB (a busy machine
        # replays a little slower, hence the wide band; a unit slip is a factor of 8 or more)
        assert rate and all(abs(float(s["value"][1]) / (25e9 * 5) - 1) < 0.5 for s in rate), rate
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            match = re.fullmatch(r"label_values\((.*), (\w+)\)", var["definition"])
            assert match is not None, var["definition"]
            series = resolved(match.group(1))
            found = poll(lambda: stack.result(series), 10, var["name"])  # noqa: B023 (used before the loop goes on)
            assert all(s["metric"].get(match.group(2)) for s in found), var["name"]
    if mode == "both":
        _both_halves_agree(stack)


def _both_halves_agree(stack: Stack) -> None:
    """Each GPU query's gpuwatch half and dcgm-exporter half give the same values at the same instant (memory
    to the MiB dcgm-exporter rounds to). Rates are left out: PCIe's gpuwatch half is a counter's rate over a
    window, dcgm-exporter's the last tick's gauge."""
    gen = generator()
    instance = stack.instances["bundled"]
    at = time.time() - 2
    compared = 0
    for _, panel_list in gen.ROWS:
        for panel in panel_list:
            for t in panel.targets:
                if t.dcgm is None or "rate(" in t.gpuwatch:
                    continue
                sides = []
                for half in (t.gpuwatch, t.dcgm):
                    expr = resolved(half.replace("{sel}", gen.GPU_SELECTOR), instance)
                    sides.append({tuple(s["metric"].get(k, "") for k in t.on): float(s["value"][1])
                                  for s in stack.result(expr, at)})
                gw, dcgm = sides
                assert gw and gw.keys() == dcgm.keys(), (panel.title, t.legend, gw, dcgm)
                tolerance = 2 * 1048576 if panel.unit == "bytes" else 1e-9
                for key, value in gw.items():
                    assert abs(value - dcgm[key]) <= tolerance + 1e-6 * abs(value), (panel.title, t.legend, key,
                                                                                   value, dcgm[key])
                compared += 1
    assert compared >= 12
