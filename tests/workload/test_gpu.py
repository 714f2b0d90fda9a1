"""The CUDA paths of the workload, on a real GPU (``pytest -m gpu``): every stage at small size, CUDA graphs
captured and replayed, BF16 close to FP32."""

from __future__ import annotations

import pytest
from tools import require_torch

torch = require_torch()

from gpuwatch.workload.config import STAGES, WorkloadConfig  # noqa: E402
from gpuwatch.workload.run import run_stage  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.torch,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_runs_on_the_gpu(stage: str) -> None:
    result = run_stage(WorkloadConfig(stage=stage, device="cuda", size="small", duration_s=1.0, warmup_s=0.3,
                                      workers=2))
    assert result.requests > 0 and result.p99_ms is not None
    if stage in ("compiled", "bf16"):
        assert result.notes["compiler"] == "cuda-graphs", result.notes
        assert result.notes["graphs"] > 0
    if stage == "bf16":
        assert result.notes["bf16_check"]["max_rel_err"] < 0.05


def test_batching_and_bf16_beat_one_request_at_a_time() -> None:
    def rps(stage: str) -> float:
        return run_stage(WorkloadConfig(stage=stage, device="cuda", size="small", duration_s=2.0, warmup_s=0.5,
                                        workers=4)).req_per_s

    assert rps("bf16") > 3 * rps("workers")


def test_a_phase_plan_runs_through_cuda_graphs_and_drops_what_an_overloaded_phase_left() -> None:
    from gpuwatch.workload.phases import Phase, Plan

    plan = Plan((Phase("bursty", 50.0, 1.5, "a"), Phase("mixed", 20000.0, 1.5, "b"), Phase("steady", 50.0, 1.5, "c")))
    result = run_stage(WorkloadConfig(stage="compiled", device="cuda", size="small", warmup_s=0.3, workers=2,
                                      plan=plan.to_json()))
    first, overload, after = result.phases
    assert first["passed"] and overload["dropped_pct"] > 1.0
    assert after["passed"], after  # the overload's backlog was dropped, not served late in the next phase
