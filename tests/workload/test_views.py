"""How validate picks its offered loads, estimates its run time, and judges whether each step helps."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from typing import Any

import pytest

from gpuwatch.validate.runner import StageRun
from gpuwatch.validate.steps import step_line, steps
from gpuwatch.validate.views import Validation, estimate_s, spread


def test_the_estimate_counts_every_run_sampled_window_and_its_start_up() -> None:
    # 5 stages + 2 naive repeats at 5 s, 5 traffic runs of 32 phases of 2 s, 12 start-ups of 15 s on cuda
    assert estimate_s("cuda", 5, 3, 5.0, 32, 2.0) == 7 * 5 + 5 * 32 * 2 + 12 * 15


def test_spread_needs_two_runs() -> None:
    assert spread([100.5]) is None
    assert spread([51.0, 100.5, 98.0]) == {"min": 51.0, "median": 98.0, "max": 100.5, "runs": 3}


def run(stage: str, **workload: Any) -> StageRun:
    return StageRun(stage, workload={"req_per_s": 1.0, "p99_ms": 1.0, "dropped_pct": 0.0, **workload})


def validation(capacity: dict[str, list[float]], p99: dict[str, float], dropped: dict[str, float] | None = None,
               ) -> Validation:
    v = Validation(list(capacity), rates=[80.0])
    v.capacity = {s: [run(s, req_per_s=x) for x in xs] for s, xs in capacity.items()}
    v.latency = {80.0: {s: run(s, p99_ms=p, dropped_pct=(dropped or {}).get(s, 0.0), req_per_s=79.0)
                        for s, p in p99.items()}}
    return v


def test_of_repeated_capacity_runs_the_median_one_is_the_row() -> None:
    v = validation({"naive": [51.0, 100.5, 98.0]}, {"naive": 40.0})
    run_ = v.capacity_run("naive")
    assert run_ is not None and run_.workload is not None and run_.workload["req_per_s"] == 98.0


def test_a_step_that_is_faster_with_no_worse_p99_has_no_reason_to_give() -> None:
    (step,) = steps(validation({"naive": [100.0], "workers": [240.0]}, {"naive": 80.0, "workers": 45.0}))
    assert step.faster and step.p99_no_worse and step.why is None and step.capacity_ratio == 2.4


def test_a_step_that_is_not_faster_says_so() -> None:
    (step,) = steps(validation({"batched": [567.0], "compiled": [476.0]}, {"batched": 20.0, "compiled": 18.0}))
    assert not step.faster
    assert step.why is not None and step.why.startswith("capacity 0.84x batched's: not faster")


def test_a_step_on_a_gpu_already_saturated_says_feeding_it_faster_cannot_add_capacity() -> None:
    v = validation({"batched": [562.9], "compiled": [562.9]}, {"batched": 14.7, "compiled": 13.0})
    v.capacity["batched"][0].recorded_row = {"stage": "batched", "sm_active": 96.6, "top_finding": "FP32"}
    (step,) = steps(v)
    assert step.why is not None
    assert "the GPU was already saturated under batched (SM activity 96.6% at full load)" in step.why
    assert step.why.endswith("it does answer sooner: p99 at 80 req/s 13 ms against 14.7 ms")


def test_a_tie_within_the_noise_is_called_a_tie_not_no_worse() -> None:
    (step,) = steps(validation({"a": [100.0], "b": [200.0]}, {"a": 14.621, "b": 14.688}))
    assert step.why is None
    assert step_line(step) == ("faster, and p99 at 80 req/s 14.688 ms against a's 14.621 ms: a tie (within 10%, "
                               "the run-to-run noise of an open-loop p99)")


def test_the_committed_validation_report_is_the_committed_run_judged_by_the_current_doctor() -> None:
    import json
    from pathlib import Path

    from gpuwatch.model.recording import load
    from gpuwatch.validate import report
    from gpuwatch.validate.rejudge import rejudge
    from gpuwatch.workload.phases import Plan

    root = Path(__file__).resolve().parents[2]
    v, meta = report.from_details(json.loads((root / "docs/gpu-runs/validation-details-h200.json").read_text()))
    numbers = report.rows(v)
    judged = rejudge(v, load(root / "docs/gpu-runs/validate-h200.ndjson.gz"), Plan(phases=()).settle_s)
    meta["findings"] = (f"judged again by the current doctor from validate-h200.ndjson.gz ({judged} runs), "
                        "the numbers as the run measured them")
    assert (root / "VALIDATION.md").read_text() == report.markdown(v, meta)
    assert json.loads((root / "validation-h200.json").read_text()) == report.rows(v)
    assert _numbers(numbers) == _numbers(report.rows(v))  # judged again: the words, never a number


def _numbers(value: object) -> object:
    """Everything but the doctor's findings, however deep."""
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items() if "finding" not in k}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value


@pytest.mark.parametrize(("p99", "dropped", "why"), [
    ({"a": 20.0, "b": 21.5}, None, None),  # within 10 %: a tie, not a regression
    ({"a": 10.0, "b": 11.5}, None, "within 2 ms"),
    ({"a": 40.0, "b": 900.0}, {"b": 60.0}, "cannot sustain the rate (79.0 req/s served, 60.0% dropped or late)"),
    ({"a": 40.0, "b": 60.0}, None, "worse (mean batch None)"),
])
def test_a_step_whose_p99_at_the_shared_rate_is_worse_says_why(
        p99: dict[str, float], dropped: dict[str, float] | None, why: str | None) -> None:
    (step,) = steps(validation({"a": [100.0], "b": [200.0]}, p99, dropped))
    if why is None:
        assert step.why is None
    else:
        assert step.why is not None and why in step.why and "p99 at 80 req/s" in step.why


@pytest.mark.parametrize(("argv", "message"), [
    (["--repeats", "0"], "--repeats must be at least 1, got 0"),
    (["--traffic", "steady,calm"],
     "--traffic: unknown shape calm; choose from steady, longtail, bursty, mixed, or all"),
    (["--mix", "steady=1,calm=1"], "--mix: 'calm=1': write SHAPE=WEIGHT with SHAPE one of steady, longtail, bursty"),
    (["--phase-duration", "0.25"], "--phase-duration 0.25 s leaves no time to count requests: give more than 0.3 s"),
    (["--workers", "0"], "--workers must be at least 1, got 0"),
    (["--doctor", "--faults", "launch_bound,nosuch"], "--faults: unknown fault nosuch; choose from"),
])
@pytest.mark.parametrize("torch_present", [True, False], ids=["torch", "no-torch"])
def test_bad_validate_options_are_one_line_errors(argv: list[str], message: str, torch_present: bool,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A wrong flag is named (exit 1) whether torch is installed or not: options are checked before torch."""
    from gpuwatch.cli.main import main

    if torch_present:  # a stand-in module passes the check, as where torch is installed; nothing runs far enough
        stand_in = types.ModuleType("torch")  # to use it
        stand_in.__spec__ = importlib.machinery.ModuleSpec("torch", None)
        monkeypatch.setitem(sys.modules, "torch", stand_in)
    else:  # None in sys.modules: find_spec and import both see no torch, as on the README's default install
        monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["validate", "--device", "cpu", *argv]) == 1
    assert message in capsys.readouterr().err


def test_validate_without_torch_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from gpuwatch.cli.main import main

    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["validate", "--device", "cpu", "--out", "/nonexistent/never-written"]) == 2
    assert "torch is not installed" in capsys.readouterr().err
