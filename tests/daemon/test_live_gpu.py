"""The daemon live on a real NVIDIA GPU (``pytest -m gpu`` on the GPU machine): /metrics carries every GPU
with NVML as a healthy source, one series per clock-event reason, and lints clean."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.model.clock_events import CLOCK_EVENT_BITS

pytestmark = pytest.mark.gpu


def test_live_daemon_exports_every_gpu(tmp_path: Path) -> None:
    pynvml = pytest.importorskip("pynvml")
    pynvml.nvmlInit()
    gpus = pynvml.nvmlDeviceGetCount()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--listen", f"127.0.0.1:{port}",
                             "--state-dir", str(tmp_path), "--interval", "0.5"], stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "the daemon did not come up"
            time.sleep(0.25)
        time.sleep(1.5)  # a few ticks: rates and GPM need two readings
        t0 = time.perf_counter()
        body = requests.get(url + "/metrics", timeout=10).text
        print(f"\nscrape: {len(body)} bytes in {(time.perf_counter() - t0) * 1e3:.1f} ms")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    samples = [s for f in text_string_to_metric_families(body) for s in f.samples]
    util = {s.labels["gpu"] for s in samples if s.name == "gpuwatch_gpu_utilization_ratio"}
    assert util == {str(i) for i in range(gpus)}
    assert [s.value for s in samples if s.name == "gpuwatch_source_up" and s.labels["source"] == "nvml"] == [1.0]
    reasons = [s for s in samples if s.name == "gpuwatch_gpu_clock_event_active"]
    assert len(reasons) >= gpus * len(CLOCK_EVENT_BITS)
    promtool = shutil.which("promtool")
    if promtool:
        check = subprocess.run([promtool, "check", "metrics"], input=body.encode(), capture_output=True,
                               timeout=30, check=False)
        assert check.returncode == 0 and not check.stdout and not check.stderr, check.stdout + check.stderr
