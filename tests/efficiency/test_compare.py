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


def test_two_runs_at_different_offered_loads_are_said_to_be_so_and_not_judged_on_what_follows_the_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """naive at 83 req/s against naive at 206 (past its capacity): p99 and throughput differ by the load, not by
    a change; compare says the loads differ before any verdict and judges only what does not follow them."""
    assert main(["compare", "--stages", str(RECORDING), "--details", str(DETAILS), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    low, high = (next(tmp_path.glob(f"naive@{rate}-*.ndjson.gz")) for rate in (83, 206))
    assert main(["compare", str(low), str(high), "--no-chart"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[1].startswith("NOT AT ONE LOAD: BASE ran at 83 req/s offered, NEW at 206 req/s offered")
    rows = {ln.split("  ")[1].strip(): ln for ln in lines if ln.startswith("  ") and "(" not in ln.split("  ")[1]}
    for label in ("p99 latency ms", "throughput req/s", "GPU-Util %"):
        assert rows[label].rstrip().endswith("other load"), rows[label]
    assert rows["memory peak GiB"].split()[-2] == "same"  # what does not follow the load is still judged
    assert main(["compare", str(low), str(high), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["offered_load"]["base"] == 83 and out["offered_load"]["new"] == 206
    assert out["offered_load"]["matched"] is False and out["regression"] is False
    same = next(tmp_path.glob("naive@206-*.ndjson.gz"))
    main(["compare", str(same), str(same), "--json"])
    assert json.loads(capsys.readouterr().out)["offered_load"]["matched"] is True
