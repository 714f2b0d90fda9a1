"""``gpuwatch report``'s rollouts over a recording: the Rollouts section and the ``rollouts`` key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch.cli.main import main
from gpuwatch.model.rollout import Rollout

SLOWER = Path(__file__).parent / "fixtures" / "rollout-slower.ndjson.gz"


def test_a_replayed_rollout_is_in_the_json_and_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--replay", str(SLOWER), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [r] = [Rollout.from_dict(d) for d in report["rollouts"]]
    assert r.verdict == "worse" and r.before.endswith("--precision bf16 --batched")
    assert r.after.endswith("--precision fp32") and r.finding_after == "input_cpu_bound"
    assert main(["report", "--replay", str(SLOWER)]) == 0
    text = capsys.readouterr().out
    section = text[text.index("Rollouts ("):]
    assert "GPU 0  root: WORSE" in section and "tensor activity: 31.9 ->" in section
    assert f"doctor: {r.finding_before} -> input_cpu_bound" in section


def test_a_recording_without_a_rollout_says_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--replay", "bundled", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rollouts"] == []
    assert main(["report", "--replay", "bundled"]) == 0
    assert "before against after)\n  none\n" in capsys.readouterr().out
