"""``gpuwatch validate`` on the CPU: every stage as its own process under the sampler, the table written out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tools import require_torch

from gpuwatch.model.recording import load, read_header
from gpuwatch.validate.runner import StageRun

require_torch()
pytestmark = pytest.mark.torch  # CI's second pass, with torch's CPU build

KEYS = ["stage", "gpu_util", "sm_active", "sm_occupancy", "tensor_active", "req_per_s", "p99_ms", "top_finding"]
TRAFFIC_KEYS = ["rate", "req_per_s_runs", "traffic"]


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("validate")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-m", "gpuwatch", "validate", "--device", "cpu", "--duration", "1",
                           "--phase-duration", "1", "--traffic", "steady,bursty", "--repeats", "2",
                           "--stages", "naive,batched", "--workers", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


def test_the_table_has_a_row_per_stage_with_the_incident_columns(validated: tuple[Path, str]) -> None:
    out, stdout = validated
    rows = json.loads((out / "validation.json").read_text())
    assert [r["stage"] for r in rows] == ["naive", "batched"]
    for row in rows:
        assert list(row) == KEYS + TRAFFIC_KEYS
        assert row["req_per_s"] > 0 and row["p99_ms"] > 0
        assert row["top_finding"]  # on a machine without a GPU: says there were no GPU metrics
        assert list(row["traffic"]) == ["steady", "bursty"]
    for name in ("naive", "batched", "SM occupancy", "top finding", "steady traffic", "bursty traffic"):
        assert name in stdout


def test_every_stage_meets_every_shape_at_the_same_rate_then_climbs_its_own_ladder(
        validated: tuple[Path, str]) -> None:
    out, _ = validated
    naive, batched = json.loads((out / "validation.json").read_text())
    runs = naive["req_per_s_runs"]
    assert len(runs) == 2 and len(batched["req_per_s_runs"]) == 1  # naive repeated: the baseline
    assert naive["rate"] == batched["rate"] == round(0.8 * sum(runs) / 2)
    details = json.loads((out / "validation-details.json").read_text())
    assert details["shapes"] == ["steady", "bursty"] and details["shared_rate"] == naive["rate"]
    for run, row in zip(details["traffic"], (naive, batched), strict=True):
        phases = run["workload"]["phases"]
        for shape in ("steady", "bursty"):
            mine = [p for p in phases if p["shape"] == shape]
            assert mine[0]["group"] == f"shared-{shape}" and mine[0]["rate"] == naive["rate"]
            rungs = [p["rate"] for p in mine[1:]]
            assert rungs and rungs == sorted(rungs) and rungs[0] == round(0.3 * row["req_per_s"])
            # the ladder stops at its first rung not sustained
            assert all(p["passed"] for p in mine[1:-1])
        for p in phases:
            assert p["samples"] >= 1 and p["top_finding"] and p["requests"] + p["unanswered"] > 0


def test_markdown_details_and_a_replayable_recording_are_written(validated: tuple[Path, str]) -> None:
    out, _ = validated
    md = (out / "VALIDATION.md").read_text()
    assert "| stage | GPU-Util % |" in md and "### batched" in md
    assert "## Capacity: each stage closed loop at full load" in md
    assert md.count("| stage | capacity req/s | planning req/s | p99 ms at R |") == 2
    assert "### steady" in md and "### bursty" in md and "- steady ladder: " in md
    assert "- batched over naive: " in md and "capacity over 2 runs" in md
    details = json.loads((out / "validation-details.json").read_text())
    assert [s["workload"]["stage"] for s in details["capacity"]] == ["naive", "naive", "batched"]
    assert read_header(out / "validate-run.ndjson.gz").meta["shapes"] == ["steady", "bursty"]
    assert len(load(out / "validate-run.ndjson.gz")) >= 4


def test_from_details_gives_back_the_same_report(validated: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = validated
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-m", "gpuwatch", "validate", "--from-details",
                           str(out / "validation-details.json"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    for name in ("VALIDATION.md", "validation.json"):
        assert (tmp_path / name).read_text() == (out / name).read_text()


def test_a_stage_that_fails_keeps_its_row_and_says_why() -> None:
    row = StageRun("bf16", error="RuntimeError: CUDA error: out of memory").row()
    assert row["top_finding"] == "failed: RuntimeError: CUDA error: out of memory"
    assert row["req_per_s"] is None and list(row) == KEYS


def test_a_stage_row_takes_the_workload_gpu_medians_and_the_doctor_top_finding() -> None:
    from doctor.synthetic import Load, window

    from gpuwatch.validate.runner import diagnose_stage

    run = StageRun("naive", workload={"pid": 471, "req_per_s": 131.26, "p99_ms": 9.04},
                   snapshots=window(Load(util=31, sm=22, occupancy=3, tensor=0, thread=99, pid=471)))
    diagnose_stage(run)
    assert run.row() == {"stage": "naive", "gpu_util": 31.0, "sm_active": 22.0, "sm_occupancy": 3.0,
                         "tensor_active": 0.0, "req_per_s": 131.3, "p99_ms": 9.0,
                         "top_finding": "Input pipeline CPU-bound: the thread that feeds the GPU is busy on the CPU"}
