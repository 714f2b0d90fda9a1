"""``gpuwatch compare`` on the reference workload's own stage runs (cut from the committed H200 validate
recording): every step is better than the one before on what it sets out to improve, at the same offered
load, and the command exits non-zero when the stages are given in reverse (a CI gate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch.cli.main import main
from gpuwatch.efficiency.compare import BY_KEY, judge, stage_steps, step_table, step_text
from gpuwatch.efficiency.runstats import run_stats
from gpuwatch.efficiency.stages import STEP_TARGETS, at_rate, cut_stages
from gpuwatch.model.recording import load

#: An H200 validate run of the five stages at full load and at two fixed rates (steady traffic), kept as a
#: fixture: the committed docs/gpu-runs run is the traffic-shape view, whose phases are cut differently.
RUNS = Path(__file__).resolve().parent / "fixtures"
RECORDING = RUNS / "stages-h200.ndjson.gz"
DETAILS = RUNS / "stages-details-h200.json"
STAGES = ("naive", "workers", "batched", "compiled", "bf16")


@pytest.fixture(scope="module")
def stage_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("stages")
    assert main(["compare", "--stages", str(RECORDING), "--details", str(DETAILS), "--out", str(out)]) == 0
    return {p.name.split("@")[0]: p for p in out.glob("*@206-*.ndjson.gz")}


def test_the_validate_recording_holds_every_stage_at_full_load_and_at_both_rates() -> None:
    runs = cut_stages(load(RECORDING), json.loads(DETAILS.read_text()))
    for rate in (None, 83.0, 206.0):
        assert [r.stage for r in at_rate(runs, rate)] == list(STAGES)
    assert all(r.workload.get("p99_ms") for r in runs)


def test_every_step_is_better_than_the_one_before_on_its_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--stages", str(RECORDING), "--details", str(DETAILS), "--rate", "206"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "->" in ln]
    assert len(lines) == 4 and all(ln.rstrip().split()[-3] == "better" for ln in lines), lines


def test_the_steps_in_reverse_help_nowhere() -> None:
    runs = at_rate(cut_stages(load(RECORDING), json.loads(DETAILS.read_text())), 206.0)
    stats = [run_stats(r.stage, r.snapshots, {"workload": r.workload}) for r in runs]
    forward = step_table(stats, STEP_TARGETS)
    backward = [judge(BY_KEY[s.metric], s.row.new, s.row.base) for s in forward]
    assert all(s.helps for s in forward)
    assert [r.verdict for r in backward] == ["worse"] * 4


@pytest.mark.parametrize("step", range(1, len(STAGES)), ids=lambda i: f"{STAGES[i]}->{STAGES[i - 1]}")
def test_compare_exits_non_zero_when_a_step_is_undone(stage_files: dict[str, Path], step: int,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    before, after = stage_files[STAGES[step - 1]], stage_files[STAGES[step]]
    assert main(["compare", str(after), str(before), "--json"]) == 1
    rows = {r["metric"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    target = rows[STEP_TARGETS[STAGES[step]]]
    assert target["verdict"] == "worse" and target["regression"]


def test_a_threshold_the_user_sets_decides_what_a_regression_is(stage_files: dict[str, Path],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base, new = str(stage_files["batched"]), str(stage_files["compiled"])
    assert main(["compare", base, new, "--json"]) == 1  # CUDA graphs keep 1.7 GiB more memory
    assert [r["metric"] for r in json.loads(capsys.readouterr().out)["rows"] if r["regression"]] == ["mem_peak_gib"]
    assert main(["compare", base, new, "--threshold", "mem_peak_gib=2", "--no-chart"]) == 0
    assert "no regression beyond the thresholds" in capsys.readouterr().out


def test_rows_within_the_noise_margin_are_the_same_and_a_percentage_threshold_is_relative() -> None:
    p99 = BY_KEY["p99_ms"]
    assert judge(p99, 100.0, 109.0).verdict == "same"
    assert judge(p99, 100.0, 111.0).verdict == "worse"
    assert judge(p99, 100.0, 104.0, "3%").regression
    assert judge(BY_KEY["gpu_util"], 30.0, 90.0).verdict == "changed"
    assert judge(p99, None, 5.0).verdict == "-"


def test_bad_input_exits_2_with_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(tmp_path / "missing.ndjson.gz"), str(RECORDING)]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["compare", str(RECORDING)]) == 2


def test_the_function_for_validates_table_takes_its_runs_as_they_are() -> None:
    runs = at_rate(cut_stages(load(RECORDING), json.loads(DETAILS.read_text())), 206.0)
    steps = stage_steps([(r.stage, r.snapshots, r.workload) for r in runs])
    assert [(s.previous, s.stage, s.helps) for s in steps] == [
        ("naive", "workers", True), ("workers", "batched", True), ("batched", "compiled", True),
        ("compiled", "bf16", True)]
    assert step_text(steps[1]).startswith("p99 latency 98.2 -> 20.1 ms: better")
