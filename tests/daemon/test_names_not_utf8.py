"""A real process whose executable name is not UTF-8 (any user of a shared host can start one), on a GPU, beside
a running daemon that reads it through the real host source: /metrics, the alerts and the roll-ups go on."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import requests
from fakes.fake_pynvml import FakeProcess, make_fake_nvml

from gpuwatch.config import AlertsConfig, Config, DaemonConfig, SamplerConfig
from gpuwatch.daemon.runner import Daemon
from gpuwatch.efficiency.store import FILE
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sampler.sampler import Sampler
from gpuwatch.sources.host import HostSource
from gpuwatch.sources.nvml import NvmlSource

RULES = """\
groups:
  - name: names
    rules:
      - alert: ProcessHoldsMemory
        condition:
          threshold: {metric: process.gpu_memory_bytes, op: ">=", value: 1}
        labels: {severity: info}
        annotations: {summary: "{{ $labels.command }} holds GPU memory"}
"""


@pytest.fixture
def latin1_process(tmp_path: Path) -> Iterator[psutil.Process]:
    """``sleep`` copied to a file named with the byte \\xe9 (Latin-1 é), running."""
    exe = os.path.join(os.fsencode(tmp_path), b"caf\xe9-serve")
    shutil.copy(shutil.which("sleep") or "/bin/sleep", exe)
    proc = subprocess.Popen([exe, "300"])
    try:
        yield psutil.Process(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_a_process_named_in_latin1_leaves_metrics_alerts_and_rollups_working(
        tmp_path: Path, latin1_process: psutil.Process) -> None:
    assert "\udce9" in latin1_process.name()  # what the host source reads: a lone surrogate
    fake = make_fake_nvml(processes_per_gpu=0)
    fake.gpus[0].util_gpu = 5  # an idle GPU: its held time is lost, and owned by the process
    fake.gpus[0].processes = [FakeProcess(pid=latin1_process.pid, used_memory=2**30)]
    (tmp_path / "rules.yml").write_text(RULES)
    state = tmp_path / "state"
    config = Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(state)),
                    alerts=AlertsConfig(rule_paths=(str(tmp_path / "rules.yml"),)),
                    sampler=SamplerConfig(interval=0.2))
    sampler = Sampler(LiveCollector([NvmlSource(nvml=fake), HostSource()]), interval=0.2)
    daemon = Daemon(config, sampler, "nvml (fake) + host", False, reload_config=lambda: config)
    thread = threading.Thread(target=lambda: asyncio.run(daemon.run()), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while daemon.bound_port is None or daemon.pipeline.evaluated < 10:
            assert time.monotonic() < deadline, f"{daemon.pipeline.evaluated}: {daemon.pipeline.evaluation_error}"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{daemon.bound_port}"
        metrics = requests.get(url + "/metrics", timeout=10)
        health = requests.get(url + "/healthz", timeout=10)
        alerts = requests.get(url + "/api/v1/alerts", timeout=10).json()["alerts"]
        snapshot = requests.get(url + "/api/v1/snapshot", timeout=10).json()
    finally:
        daemon.request_stop()
        thread.join(30)
    assert metrics.status_code == 200, metrics.text[:300]
    assert 'command="caf\\\\xe9-serve"' in metrics.text  # the byte stays visible, escaped as Prometheus does
    assert health.status_code == 200, health.text
    assert daemon.pipeline.evaluation_failures == 0
    assert [a["labels"]["command"] for a in alerts] == ["caf\\xe9-serve"]
    assert [p["name"] for p in snapshot["processes"]] == ["caf\\xe9-serve"]
    with sqlite3.connect(state / FILE) as db:
        commands = {row[0] for row in db.execute("SELECT command FROM lost_seconds")}
        allocated = db.execute("SELECT sum(allocated) FROM gpu_seconds").fetchone()[0]
    assert commands == {"caf\\xe9-serve"}
    assert allocated and allocated > 1.0
