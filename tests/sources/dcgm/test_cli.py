"""The real ``gpuwatch snapshot --json --dcgm URL`` command against a dcgm-exporter on 127.0.0.1.

On a machine without an NVIDIA driver the GPUs come from DCGM alone; when the exporter is down the command
says so in one line and exits 2, with no traceback.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sources.dcgm.exporter import FakeExporter, fixture, unused_port

H100_UUIDS = ["GPU-5a3c1f2e-8d47-4b9e-a1c3-7f20e6d94b18", "GPU-c0e9b6a4-21f3-4d8a-9e57-3b6d0a8f1c22"]
H200_UUIDS = ["GPU-9e1d7c30-4b2a-4f6e-8c15-d2a7b3e04f91", "GPU-3f8b21d6-7ac4-49e0-b6d2-15c9e7a0d384"]


def gpuwatch(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("gpuwatch", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "gpuwatch"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60)


def snapshot_json(url: str) -> dict[str, Any]:
    run = gpuwatch("snapshot", "--json", "--interval", "0.1", "--dcgm", url)
    assert run.returncode == 0, run.stderr
    snap: dict[str, Any] = json.loads(run.stdout)
    if any(s["name"] == "nvml" and s["state"] == "ok" for s in snap["sources"]):
        pytest.skip("this machine has an NVIDIA driver: its own GPUs lead, DCGM's merge into them")
    return snap


@pytest.mark.parametrize(("body", "uuids", "power", "sm_clock"), [
    ("dcgm-exporter-sample.prom", H100_UUIDS, [687.412, 71.205], [1980.0, 345.0]),
    ("dcgm-exporter-4.10-h200-k8s.prom", H200_UUIDS, [612.877, 74.118], [1980.0, 345.0]),
], ids=["legacy-names", "4.10-names-hz-and-ratios"])
def test_snapshot_json_prints_both_gpus_from_dcgm_in_model_units(exporter: FakeExporter, body: str,
                                                                  uuids: list[str], power: list[float],
                                                                  sm_clock: list[float]) -> None:
    exporter.serve(fixture(body))
    snap = snapshot_json(exporter.url)
    assert [g["uuid"] for g in snap["gpus"]] == uuids
    assert [g["power_w"] for g in snap["gpus"]] == power
    assert [g["sm_clock_mhz"] for g in snap["gpus"]] == sm_clock
    assert snap["gpus"][0]["profiling"]["dcgm"]["sm_active"] > 1.0  # percent, not a 0-1 ratio
    assert {s["name"]: s["state"] for s in snap["sources"]}["dcgm"] == "ok"


@pytest.mark.parametrize(("setup", "message"), [
    ("stopped", r"connection refused"),
    ("http-500", r"answered HTTP 500"),
    ("empty", r"empty body"),
])
def test_snapshot_with_the_exporter_unusable_exits_2_with_one_line(exporter: FakeExporter, setup: str,
                                                                    message: str) -> None:
    url = exporter.url
    if setup == "stopped":
        exporter.stop()
    elif setup == "http-500":
        exporter.behave(mode="body", status=500, body=b"internal error")
    else:
        exporter.serve(b"")
    run = gpuwatch("snapshot", "--json", "--interval", "0.1", "--dcgm", url)
    if run.returncode == 0 and '"nvml"' in run.stdout:
        pytest.skip("this machine has an NVIDIA driver: its GPUs are still shown")
    assert run.returncode == 2
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr
    assert lines[0].startswith("gpuwatch: no GPU readings: dcgm: ")
    assert message in lines[0]


def test_a_dcgm_url_without_a_scheme_is_a_usage_error_not_a_traceback() -> None:
    run = gpuwatch("snapshot", "--dcgm", f"127.0.0.1:{unused_port()}/metrics")
    assert run.returncode == 2
    assert "looks like http://node:9400/metrics" in run.stderr and "Traceback" not in run.stderr
