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

KEYS = ["stage", "gpu_util", "sm_active", "sm_occupancy", "tensor_active", "req_per_s", "p99_ms", "top_finding"]
LATENCY_KEYS = ["rate", "p99_ms_at_rate", "dropped", "rate_high", "p99_ms_at_rate_high", "dropped_at_rate_high",
                "req_per_s_runs"]


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("validate")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-m", "gpuwatch", "validate", "--device", "cpu", "--duration", "1",
                           "--latency-duration", "1", "--repeats", "2", "--stages", "naive,batched",
                           "--workers", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


def test_the_table_has_a_row_per_stage_with_the_incident_columns(validated: tuple[Path, str]) -> None:
    out, stdout = validated
    rows = json.loads((out / "validation.json").read_text())
    assert [r["stage"] for r in rows] == ["naive", "batched"]
    for row in rows:
        assert list(row) == KEYS + LATENCY_KEYS
        assert row["req_per_s"] > 0 and row["p99_ms"] > 0
        assert row["top_finding"]  # on a machine without a GPU: says there were no GPU metrics
    for name in ("naive", "batched", "SM occupancy", "top finding"):
        assert name in stdout


def test_the_latency_view_offers_every_stage_the_same_rate_chosen_from_naive_capacity(
        validated: tuple[Path, str]) -> None:
    out, _ = validated
    naive, batched = json.loads((out / "validation.json").read_text())
    runs = naive["req_per_s_runs"]
    assert len(runs) == 2 and len(batched["req_per_s_runs"]) == 1  # naive repeated: the baseline
    assert naive["rate"] == batched["rate"] == round(0.8 * sum(runs) / 2)
    assert naive["rate_high"] == batched["rate_high"] == round(2 * sum(runs) / 2)
    for row in (naive, batched):
        assert row["p99_ms_at_rate"] > 0 and 0 <= row["dropped"] <= 100
        assert row["p99_ms_at_rate_high"] > 0 and 0 <= row["dropped_at_rate_high"] <= 100


def test_markdown_details_and_a_replayable_recording_are_written(validated: tuple[Path, str]) -> None:
    out, _ = validated
    md = (out / "VALIDATION.md").read_text()
    assert "| stage | GPU-Util % |" in md and "### batched" in md
    assert "## Capacity: each stage closed loop at full load" in md
    assert md.count("| stage | served req/s | p50 ms | p95 ms | p99 ms | dropped or late % |") == 2
    assert "- batched over naive: " in md and "capacity over 2 runs" in md
    details = json.loads((out / "validation-details.json").read_text())
    assert [s["workload"]["stage"] for s in details["capacity"]] == ["naive", "naive", "batched"]
    assert [[s["workload"]["notes"]["offered_rate"] for s in runs] for runs in details["latency"].values()] == \
        [[r] * 2 for r in details["rates"]]
    assert read_header(out / "validate-run.ndjson.gz").meta["stages"] == ["naive", "batched"]
    assert len(load(out / "validate-run.ndjson.gz")) >= 4


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
                         "top_finding": "Input pipeline CPU-bound: the thread that feeds the GPU is busy in Python"}
