"""The traffic view's judgements from phase rows: capacity from a rate ladder, the 70-85 % planning band,
whether each step helps under a shape (and why not), the tenfold bar, and ``--from-details`` giving back the
same numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuwatch.validate import report
from gpuwatch.validate.runner import StageRun
from gpuwatch.validate.shapes import acceptance, capacity_cell, ladder, shape_steps, sizing
from gpuwatch.validate.views import Validation

STAGES = ["naive", "bf16"]


def phase(shape: str, rate: float, passed: bool = True, group: str = "ladder", **kw: Any) -> dict[str, Any]:
    return {"shape": shape, "rate": rate, "group": f"{group}-{shape}", "wall_start": 0.0, "wall_end": 2.0,
            "p50_ms": kw.pop("p50_ms", 5.0), "p99_ms": kw.pop("p99_ms", 9.0), "dropped_pct": 0.0 if passed else 40.0,
            "passed": passed, "gpu_util": kw.pop("gpu_util", 50.0), "top_finding": kw.pop("top", "-"), **kw}


def traffic_run(stage: str, *phases: dict[str, Any]) -> StageRun:
    return StageRun(stage, workload={"stage": stage, "req_per_s": 10.0, "phases": list(phases)})


def test_capacity_is_the_highest_rung_sustained_with_every_lower_rung_sustained_too() -> None:
    rungs = [phase("steady", 20), phase("steady", 40), phase("steady", 60, passed=False), phase("steady", 80)]
    size = sizing(rungs)
    assert size.capacity == 40 and not size.top_rung and capacity_cell(size) == "40"
    top = sizing([phase("steady", 20), phase("steady", 40)])
    assert capacity_cell(top) == ">= 40"  # never failed: a lower bound
    assert capacity_cell(sizing([phase("steady", 20, passed=False)])) == "below the lowest rung"


def test_the_planning_rate_is_the_highest_sustained_rung_in_the_70_to_85_percent_band() -> None:
    rungs = [phase("mixed", 20, gpu_util=40.0), phase("mixed", 40, gpu_util=72.0), phase("mixed", 60, gpu_util=84.0),
             phase("mixed", 80, gpu_util=95.0), phase("mixed", 100, passed=False, gpu_util=99.0)]
    size = sizing(rungs)
    assert size.planning == 60 and size.band_note == "GPU-Util 84% at 60 req/s"
    idle = sizing([phase("bursty", 20, gpu_util=12.0), phase("bursty", 40, gpu_util=31.5)])
    assert idle.planning is None
    assert idle.band_note == "never reaches 70% GPU-Util while it meets the objective (at most 31.5%)"


def validation(shape: str, naive: list[dict[str, Any]], bf16: list[dict[str, Any]]) -> Validation:
    v = Validation(list(STAGES), shapes=[shape], shared_rate=50.0)
    v.capacity = {s: [StageRun(s, workload={"stage": s, "req_per_s": r})]
                  for s, r in (("naive", 60.0), ("bf16", 900.0))}
    v.traffic = {"naive": traffic_run("naive", *naive), "bf16": traffic_run("bf16", *bf16)}
    return v


def test_a_step_that_adds_no_capacity_under_a_shape_says_so_with_the_doctor_top_finding() -> None:
    v = validation("bursty",
                   [phase("bursty", 50, group="shared", p99_ms=80.0), phase("bursty", 30), phase("bursty", 60),
                    phase("bursty", 90, passed=False)],
                   [phase("bursty", 50, group="shared", p99_ms=6.0), phase("bursty", 30, top="Demand-bound"),
                    phase("bursty", 60, passed=False)])
    (step,) = shape_steps(v.stages, v.traffic, "bursty", 50.0)
    assert not step.helps
    assert step.line.startswith("does not help: capacity 60 -> 30 req/s: no higher; the doctor's top finding for "
                                "bf16 at its highest sustained rate: Demand-bound")
    assert "p99 at 50 req/s 80 -> 6 ms" in step.line


def test_a_step_with_more_capacity_and_a_lower_p99_helps() -> None:
    v = validation("steady", [phase("steady", 50, group="shared", p99_ms=210.0), phase("steady", 30),
                              phase("steady", 60, passed=False)],
                   [phase("steady", 50, group="shared", p99_ms=4.2), phase("steady", 300)])
    (step,) = shape_steps(v.stages, v.traffic, "steady", 50.0)
    assert step.helps and step.line == "helps: capacity 30 -> >= 300 req/s; p99 at 50 req/s 210 -> 4.2 ms"
    assert acceptance(v.stages, v.traffic, "steady", 50.0) == \
        "p99 at 50 req/s 210 ms (naive) -> 4.2 ms (bf16): 50.0x, at least 10x"


def test_a_capacity_both_ladders_leave_open_is_not_called_a_gain() -> None:
    v = validation("mixed", [phase("mixed", 50, group="shared"), phase("mixed", 100), phase("mixed", 300)],
                   [phase("mixed", 50, group="shared"), phase("mixed", 100), phase("mixed", 200)])
    (step,) = shape_steps(v.stages, v.traffic, "mixed", 50.0)
    assert not step.helps and "capacity >= 300 -> >= 200 req/s: not settled" in step.line


def test_under_the_tenfold_bar_the_report_says_why_with_numbers() -> None:
    v = validation("longtail", [phase("longtail", 50, group="shared", p99_ms=24.0, gpu_util=31.0)],
                   [phase("longtail", 50, group="shared", p99_ms=6.0, p50_ms=3.1, gpu_util=9.0, top="Demand-bound")])
    text = acceptance(v.stages, v.traffic, "longtail", 50.0)
    assert text.startswith("p99 at 50 req/s 24 ms (naive) -> 6 ms (bf16): 4.0x, under 10x: naive answers at this "
                           "rate within 24 ms (0% late, GPU-Util 31%), so a 10x fall would need bf16 under 2.4 ms")
    assert text.endswith("the doctor's top finding for bf16 at this rate: Demand-bound")
    v.traffic["bf16"].workload["phases"][0].update(dropped_pct=12.5)  # type: ignore[index]
    assert "bf16 does not sustain 50 req/s under longtail traffic (12.5% late" in \
        acceptance(v.stages, v.traffic, "longtail", 50.0)


def test_from_details_gives_back_the_same_tables_and_numbers(tmp_path: Path) -> None:
    from gpuwatch.cli.main import main

    v = validation("mixed", [phase("mixed", 50, group="shared", p99_ms=210.0), phase("mixed", 30, gpu_util=75.0)],
                   [phase("mixed", 50, group="shared", p99_ms=4.2, p99_is_lower_bound=False),
                    phase("mixed", 300, gpu_util=80.5), phase("mixed", 500, passed=False)])
    v.mix = {"steady": 0.5, "longtail": 0.25, "bursty": 0.25}
    first = report.write(tmp_path / "run", v, {"device": "cuda", "date": "now"})
    assert main(["validate", "--from-details", str(first["details"]), "--out", str(tmp_path / "again")]) == 0
    for name in ("VALIDATION.md", "validation.json"):
        assert (tmp_path / "again" / name).read_text() == (tmp_path / "run" / name).read_text()
    rows = json.loads(first["json"].read_text())
    assert rows[1]["traffic"]["mixed"] | {"band": None} == {
        "capacity_req_per_s": 300, "capacity_is_lower_bound": False, "planning_req_per_s": 300, "band": None,
        "p99_ms_at_rate": 4.2, "p99_is_lower_bound": False, "dropped_at_rate": 0.0, "gpu_util_at_rate": 50.0,
        "top_finding_at_rate": "-", "failed": None}
    md = first["markdown"].read_text()
    assert "## Capacity for planning: the mixed shape" in md
    assert "| bf16 | 300 | 300 | GPU-Util 80.5% at 300 req/s |" in md
    assert [p["rate"] for p in ladder(v.traffic["bf16"], "mixed")] == [300, 500]
