"""gpuwatch pushing into a real Alertmanager (the Debian package), as Prometheus does: the replayed
incident's alert shows in Alertmanager with gpuwatch's labels, is re-sent while it fires, ends when it
resolves, and reaches an Alertmanager that was down when it fired once that Alertmanager is up."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from tools import require_tool

from daemon.conftest import RunningDaemon
from daemon.incident import write_recording, write_rules
from daemon.test_prometheus import free_port, poll
from gpuwatch.config import AlertsConfig, Config, DaemonConfig, NotifyConfig, ReceiverConfig

#: Far longer than any test: an alert that leaves Alertmanager's list was ended by gpuwatch's endsAt.
RESOLVE_TIMEOUT = "1h"


class Alertmanager:
    """``alertmanager`` on 127.0.0.1:``port`` with a do-nothing route; :meth:`alerts` lists what it holds."""

    def __init__(self, tmp_path: Path, port: int) -> None:
        self.binary = require_tool("prometheus-alertmanager", "alertmanager")
        self.tmp_path, self.port = tmp_path, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        config = self.tmp_path / "am.yml"
        config.write_text(yaml.safe_dump({"global": {"resolve_timeout": RESOLVE_TIMEOUT},
                                          "route": {"receiver": "null"}, "receivers": [{"name": "null"}]}))
        log = (self.tmp_path / "am.log").open("ab")
        self.proc = subprocess.Popen([self.binary, f"--config.file={config}",
                                      f"--storage.path={self.tmp_path / 'am-data'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
                                     stdout=subprocess.DEVNULL, stderr=log)
        poll(lambda: requests.get(self.url + "/-/ready", timeout=2).status_code == 200, 30,
             "Alertmanager's /-/ready")

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """Alerts called ``name`` that Alertmanager holds as not yet ended."""
        found = requests.get(self.url + "/api/v2/alerts", timeout=5).json()
        return [a for a in found if a["labels"].get("alertname") == name]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[Alertmanager]:
    am = Alertmanager(tmp_path, free_port())
    yield am
    am.stop()


def pushing_config(tmp_path: Path, am: Alertmanager, resend: str = "2s") -> Config:
    return Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "state")),
                  alerts=AlertsConfig(rule_paths=(str(write_rules(tmp_path / "rules.yml")),)),
                  notify=NotifyConfig(initial_backoff=0.2, max_backoff=1.0),
                  receivers=(ReceiverConfig(name="am", kind="alertmanager_api", url=am.url + "/",
                                            repeat_interval=float(resend[:-1])),))


def outbox_rows(d: RunningDaemon) -> list[tuple[str, int]]:
    return d.daemon.outbox.conn.execute("SELECT status, attempts FROM outbox ORDER BY id").fetchall()


def firing(d: RunningDaemon) -> bool:
    return any(a.name == "GpuStarved" and a.state == "firing" for a in d.daemon.pipeline.alerts)


@pytest.mark.slow
def test_the_incident_shows_in_alertmanager_with_its_labels_is_re_sent_and_ends_when_resolved(
        tmp_path: Path, alertmanager: Alertmanager) -> None:
    alertmanager.start()
    # Starved from replay second 50 to 150 of 200; at 5x GpuStarved fires ~12 s in and resolves ~30 s in.
    recording = write_recording(tmp_path / "incident.ndjson.gz", n=200)
    d = RunningDaemon(pushing_config(tmp_path, alertmanager), recording, speed=5.0)
    try:
        (held,) = poll(lambda: alertmanager.alerts("GpuStarved"), 40, "GpuStarved in Alertmanager")
        first_update = held["updatedAt"]
        later = poll(lambda: [a for a in alertmanager.alerts("GpuStarved") if a["updatedAt"] != first_update],
                     10, "a re-send of the firing alert")
        while firing(d):
            assert alertmanager.alerts("GpuStarved") or not firing(d), "Alertmanager ended an alert still firing"
            time.sleep(0.2)
        poll(lambda: not alertmanager.alerts("GpuStarved") or None, 15, "GpuStarved to end in Alertmanager")
        rows = outbox_rows(d)
    finally:
        d.stop()
    # The alert's own labels, the empty ones (no pod on this host) left out as Prometheus leaves them out.
    assert held["labels"] == {"alertname": "GpuStarved", "gpu": "0", "name": "NVIDIA H200", "hostname": "gpu-node-1",
                              "uuid": "GPU-00000000-1111-2222-3333-444444444444", "severity": "warning"}
    assert held["annotations"]["summary"] == "GPU 0 holds memory but is idle"
    assert held["status"]["state"] == "active"
    assert held["startsAt"].startswith("2025-12-02T09:0")  # the recording's time, not the replay's wall clock
    assert held["generatorURL"].endswith("/api/v1/alerts")
    assert len(later) == 1 and later[0]["startsAt"] == held["startsAt"]  # the same alert, heard of again
    assert rows and all(status == "delivered" for status, _ in rows)


@pytest.mark.slow
def test_an_alert_that_fired_while_alertmanager_was_down_is_delivered_once_it_is_up(
        tmp_path: Path, alertmanager: Alertmanager) -> None:
    # Starved from replay second 100 on and never recovers: GpuStarved fires ~11 s in and stays firing.
    recording = write_recording(tmp_path / "incident.ndjson.gz", n=400, recovers=False)
    d = RunningDaemon(pushing_config(tmp_path, alertmanager), recording, speed=10.0)
    try:
        poll(lambda: any(attempts >= 3 for _, attempts in outbox_rows(d)), 40, "three failed deliveries")
        time.sleep(1.0)  # several re-send intervals (2 s of replay each) pass while Alertmanager is down
        while_down = d.daemon.outbox.conn.execute("SELECT status, body FROM outbox ORDER BY id").fetchall()
        metrics = requests.get(d.url + "/metrics", timeout=5).text
        alertmanager.start()  # the same port: the outbox's next retry reaches it
        (held,) = poll(lambda: alertmanager.alerts("GpuStarved"), 30, "GpuStarved in Alertmanager once it is up")
        poll(lambda: all(s == "delivered" for s, _ in outbox_rows(d)) or None, 15, "the outbox to drain")
    finally:
        d.stop()
    # One request per alert group waits (its first firing); the re-sends due meanwhile do not pile up behind.
    waiting = sorted(a["labels"]["alertname"] for status, body in while_down for a in json.loads(body)
                     if status == "pending")
    assert waiting == ["GpuStarved", "ThreadCpuBound"] and len(while_down) == 2
    assert 'gpuwatch_notifications{receiver="am",state="pending"} 2.0' in metrics
    assert held["labels"]["gpu"] == "0" and held["status"]["state"] == "active"
