"""Every mechanism variant is a real program: each runs briefly on the CPU (the GPU run records them)."""

from __future__ import annotations

import pytest
from tools import require_torch

torch = require_torch()

from gpuwatch.workload.faults import run_fault  # noqa: E402
from gpuwatch.workload.faults_catalogue import MECHANISM_FAULTS  # noqa: E402

SLOW_ON_CPU = ("compile_shapes", "compile_per_request")  # inductor compiles C++ on the CPU: tens of seconds


@pytest.mark.parametrize("fault", [f for f in MECHANISM_FAULTS if f not in SLOW_ON_CPU])
def test_each_mechanism_variant_runs_on_the_cpu(fault: str) -> None:
    ready: list[bool] = []
    result = run_fault(fault, 0.5, lambda: ready.append(True), device="cpu")
    assert ready == [True] and result["loops"] >= 1 and result["fault"] == fault


@pytest.mark.slow
@pytest.mark.parametrize("fault", SLOW_ON_CPU)
def test_each_compile_variant_compiles_on_the_cpu(fault: str) -> None:
    result = run_fault(fault, 0.5, lambda: None, device="cpu")
    assert result["loops"] >= 1
