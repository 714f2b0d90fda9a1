"""The doctor on real signals: each fault class of ``gpuwatch workload --fault``, recorded on an H200 by
``gpuwatch validate --doctor``, must get its own class as the top finding, as ``gpuwatch doctor`` judges
live (the last 15 s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch.cli.main import main
from gpuwatch.doctor import LIVE_WINDOW_S, diagnose, top_problem
from gpuwatch.doctor.current import window
from gpuwatch.model.recording import load, read_header
from gpuwatch.validate.doctor_accuracy import markdown
from gpuwatch.workload.faults_catalogue import FAULTS

FIXTURES = Path(__file__).parent / "fixtures" / "faults"


def test_every_fault_class_has_a_recording_from_the_h200() -> None:
    assert sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.ndjson.gz")) == sorted(FAULTS)
    for path in FIXTURES.glob("*.ndjson.gz"):
        assert any(g.name == "NVIDIA H200" for g in load(path)[0].gpus), path


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_the_injected_class_is_the_top_finding(fault: str) -> None:
    snaps = window(load(FIXTURES / f"{fault}.ndjson.gz"), LIVE_WINDOW_S)
    findings = diagnose(snaps)
    top = top_problem(findings)
    assert top is not None and top.code == FAULTS[fault][0], [f"{f.severity}:{f.code}" for f in findings]
    assert read_header(FIXTURES / f"{fault}.ndjson.gz").meta["expected"] == FAULTS[fault][0]


def test_only_the_healthy_run_is_free_of_warnings() -> None:
    for fault in FAULTS:
        findings = diagnose(window(load(FIXTURES / f"{fault}.ndjson.gz"), LIVE_WINDOW_S))
        warned = any(f.severity != "info" for f in findings)
        assert warned == (fault != "healthy"), (fault, [f"{f.severity}:{f.code}" for f in findings])


def test_the_cli_names_the_launch_bound_loop_with_its_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--replay", str(FIXTURES / "launch_bound.ndjson.gz"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    top = out["findings"][0]
    assert top["code"] == "launch_bound"
    assert any("but SM activity" in e and "busy only launching" in e for e in top["evidence"]), top["evidence"]
    assert "CUDA graphs" in top["fix"]


def test_the_committed_accuracy_table_is_the_rendering_of_its_json() -> None:
    docs = Path(__file__).parents[2] / "docs"
    data = json.loads((docs / "doctor-accuracy-h200.json").read_text())
    assert (docs / "doctor-accuracy-h200.md").read_text() == markdown(data["faults"], data["meta"])
    assert {row["fault"] for row in data["faults"]} == set(FAULTS)
