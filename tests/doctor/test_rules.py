"""The doctor's rules, one row per situation: what the window looks like and what the doctor must say."""

from __future__ import annotations

import dataclasses

import pytest

from doctor.synthetic import Load, window
from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot

# Numbers from reference/h200-probe-2026-12-02.log where the situation was measured there.
NAIVE_PROBE = Load(util=2, sm=1.2, occupancy=0.2, tensor=0.0, dram=0.0, thread=98)
BATCHED_FP32_PROBE = Load(util=100, sm=95.5, occupancy=18.5, tensor=0.2, dram=15.9, thread=100, clock=1950,
                          events=("power_cap",))
BF16_PROBE = Load(util=97, sm=87.5, occupancy=51.6, tensor=27.1, dram=32.5, thread=100, clock=1950,
                  events=("power_cap",))

CASES = [
    # name, window, the top finding, codes that must not appear
    ("naive Python service on the H200: input CPU-bound", NAIVE_PROBE, "input_cpu_bound", {"healthy"}),
    ("batched FP32 on the H200: tensor cores idle", BATCHED_FP32_PROBE, "fp32_no_tensor",
     {"small_kernels", "throttled", "input_cpu_bound"}),
    ("BF16 on the H200: healthy, no warning", BF16_PROBE, "healthy",
     {"fp32_no_tensor", "small_kernels", "input_cpu_bound", "throttled"}),
    ("one request at a time: GPU-Util high, SMs mostly empty", Load(util=88, sm=30, occupancy=4, thread=100),
     "small_kernels", {"input_cpu_bound"}),
    ("one request at a time, SMs fairly full but GPU-Util gaps: feeding first, FP32 later",
     Load(util=88, sm=75, occupancy=12, tensor=0.1, thread=100), "small_kernels", {"input_cpu_bound"}),
    ("DRAM saturated", Load(util=99, sm=90, occupancy=40, tensor=30, dram=85), "memory_bandwidth_bound", {"healthy"}),
    ("threads in D state while the GPU waits", Load(util=20, sm=8, io_wait_threads=3, thread=30), "off_cpu_wait",
     set()),
    ("host iowait while the GPU waits", Load(util=25, sm=10, host_iowait=22, thread=20), "off_cpu_wait", set()),
    ("thermal slowdown cuts the clock", Load(util=99, sm=92, tensor=40, clock=1200, events=("hw_thermal",)),
     "throttled", {"healthy"}),
    ("80% memory, 12% GPU-Util, nothing hot on the CPU", Load(util=12, sm=5, mem_percent=80, thread=20),
     "memory_idle", set()),
    ("incident night: 80% memory, 12% GPU-Util, serving thread full", Load(util=12, sm=5, mem_percent=80, thread=99),
     "input_cpu_bound", set()),
    ("huge host-to-device traffic", Load(util=70, sm=60, pcie_rx=12e9, thread=40), "h2d_copies", set()),
    ("GPU without profiling counters, saturated", Load(util=100, sm=None, occupancy=None, tensor=None, thread=50),
     None, {"fp32_no_tensor", "small_kernels"}),
]


@pytest.mark.parametrize(("load", "top", "absent"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_top_finding_names_the_bottleneck(load: Load, top: str | None, absent: set[str]) -> None:
    findings = diagnose(window(load))
    codes = {f.code for f in findings}
    best = top_problem(findings)
    assert (best.code if best else None) == top, [f.code for f in findings]
    assert not codes & absent


@pytest.mark.parametrize("load", [BF16_PROBE, Load(util=100, sm=95, occupancy=60, tensor=55, clock=1700,
                                                   events=("power_cap",))],
                         ids=["bf16 probe", "at the power cap"])
def test_a_saturated_gpu_using_tensor_cores_gets_no_warning(load: Load) -> None:
    findings = diagnose(window(load))
    assert all(f.severity == "info" for f in findings)
    assert "healthy" in {f.code for f in findings}


def test_fp32_is_a_warning_only_once_the_gpu_is_the_bottleneck() -> None:
    gappy = {f.code: f.severity for f in diagnose(window(Load(util=88, sm=75, tensor=0.1, thread=100)))}
    bound = {f.code: f.severity for f in diagnose(window(BATCHED_FP32_PROBE))}
    assert (gappy["fp32_no_tensor"], bound["fp32_no_tensor"]) == ("info", "warning")


def test_every_finding_carries_numbers_and_a_fix() -> None:
    for load in (c[1] for c in CASES):
        for f in diagnose(window(load)):
            assert any(ch.isdigit() for e in f.evidence for ch in e), f
            assert len(f.fix) > 40, f


def test_findings_are_ranked_most_severe_then_most_costly() -> None:
    both = Load(util=35, sm=30, occupancy=3, tensor=0, mem_percent=80, thread=99)
    findings = diagnose(window(both))
    assert [f.rank_key for f in findings] == sorted(f.rank_key for f in findings)
    assert findings[0].code == "input_cpu_bound"


def test_a_pid_restricts_the_diagnosis_to_its_process_and_gpu() -> None:
    snaps = window(NAIVE_PROBE, n=5)
    assert top_problem(diagnose(snaps, pid=471)).code == "input_cpu_bound"  # type: ignore[union-attr]
    other = diagnose(snaps, pid=999)
    assert [f.code for f in other] == ["pid_not_on_gpu"]


def test_no_gpu_in_the_window_says_so_instead_of_guessing() -> None:
    snaps = [dataclasses.replace(s, gpus=(), processes=()) for s in window(NAIVE_PROBE, n=3)]
    assert [f.code for f in diagnose(snaps)] == ["no_gpu_data"]
    assert diagnose([]) == []


def test_a_short_spike_does_not_change_the_diagnosis() -> None:
    snaps: list[Snapshot] = window(NAIVE_PROBE, n=9) + window(BF16_PROBE, n=2, t0=1_764_666_100.0)
    assert top_problem(diagnose(snaps)).code == "input_cpu_bound"  # type: ignore[union-attr]


def test_finding_round_trips_through_a_dict() -> None:
    for f in diagnose(window(NAIVE_PROBE)):
        assert Finding.from_dict(f.to_dict()) == f
