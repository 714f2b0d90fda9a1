"""Fleet mode for real: Prometheus scrapes the daemon replaying the incident, the exported gpuwatch rules
fire in Prometheus, and Alertmanager accepts the alerts and delivers them to a webhook."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from notify.receiver import Receiver
from tools import require_tool

from daemon.incident import write_recording

EXPORTED_RULES = Path(__file__).resolve().parents[2] / "alerts" / "prometheus" / "gpuwatch-rules.yml"
EXPECTED = {"GpuMemoryHeldWhileIdle", "ProcessThreadCpuBound"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def poll(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except requests.RequestException as exc:
            last = exc
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; last: {last}")


def fast_rules(tmp_path: Path) -> Path:
    """The exported rules with ``for``/``keep_firing_for`` cut to seconds so a test sees them fire."""
    doc = yaml.safe_load(EXPORTED_RULES.read_text())
    for group in doc["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "2s"
            if "keep_firing_for" in rule:
                rule["keep_firing_for"] = "1s"
    out = tmp_path / "rules.yml"
    out.write_text(yaml.safe_dump(doc))
    return out


class Processes:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture
def procs() -> Iterator[Processes]:
    p = Processes()
    yield p
    p.stop()


@pytest.mark.slow
def test_exported_rules_fire_in_prometheus_and_reach_alertmanager(tmp_path: Path, procs: Processes) -> None:
    prometheus = require_tool("prometheus")
    alertmanager = require_tool("prometheus-alertmanager", "alertmanager")
    if not EXPORTED_RULES.exists():
        pytest.fail(f"{EXPORTED_RULES} is missing: run 'gpuwatch rules export'")
    hook = Receiver()
    try:
        gw, prom, am = free_port(), free_port(), free_port()
        recording = write_recording(tmp_path / "incident.ndjson.gz", n=600, recovers=False)
        procs.start([sys.executable, "-m", "gpuwatch", "daemon", "--replay", str(recording), "--speed", "10",
                     "--listen", f"127.0.0.1:{gw}", "--state-dir", str(tmp_path / "gw")], tmp_path / "gw.log")
        (tmp_path / "am.yml").write_text(yaml.safe_dump({
            "route": {"receiver": "hook", "group_by": ["alertname"], "group_wait": "1s", "group_interval": "1s"},
            "receivers": [{"name": "hook", "webhook_configs": [{"url": hook.url}]}]}))
        procs.start([alertmanager, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'am'}",
                     f"--web.listen-address=127.0.0.1:{am}", "--cluster.listen-address="], tmp_path / "am.log")
        (tmp_path / "prom.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(fast_rules(tmp_path))],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am}"]}]}]},
            "scrape_configs": [{"job_name": "gpuwatch", "static_configs": [{"targets": [f"127.0.0.1:{gw}"]}]}]}))
        procs.start([prometheus, f"--config.file={tmp_path / 'prom.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{prom}"], tmp_path / "prom.log")

        def prom_firing() -> set[str]:
            alerts = requests.get(f"http://127.0.0.1:{prom}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
            names = {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}
            return names if names >= EXPECTED else set()

        firing = poll(prom_firing, 50, "the exported rules to fire in Prometheus")
        assert firing >= EXPECTED

        def am_active() -> set[str]:
            alerts = requests.get(f"http://127.0.0.1:{am}/api/v2/alerts", timeout=5).json()
            names = {a["labels"]["alertname"] for a in alerts if a["status"]["state"] == "active"}
            return names if names >= EXPECTED else set()

        poll(am_active, 30, "Alertmanager to hold the alerts")
        poll(lambda: {r.json()["groupLabels"]["alertname"] for r in hook.delivered()} >= EXPECTED, 30,
             "Alertmanager's webhook")
        body = next(r.json() for r in hook.delivered()
                    if r.json()["groupLabels"]["alertname"] == "GpuMemoryHeldWhileIdle")
        labels = body["alerts"][0]["labels"]  # the exporter's labels made it through Prometheus and Alertmanager
        assert (labels["gpu"], labels["instance"]) == ("0", f"127.0.0.1:{gw}") and "hostname" not in labels
    finally:
        hook.close()
