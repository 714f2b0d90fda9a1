"""The shipped rules' conditions on GPU readings measured on an H200 (GPM counters from the probe in
shared/reference/h200-probe-2026-12-02.log, one row per phase of the incident workload; memory as held by
the incident's 75 % pool; the serving thread's CPU as py-spy/pidstat showed it)."""

from __future__ import annotations

import pytest

from alerts.build import GIB, snap
from gpuwatch.alerts import DEFAULT_RULES, AlertEngine, load_rules
from gpuwatch.alerts.engine import build
from gpuwatch.alerts.entities import Frame
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, Profiling

INSTANT = ("GpuMemoryHeldWhileIdle", "GpuUtilOverstatesWork", "GpuTensorCoresIdleUnderLoad",
           "ProcessThreadCpuBound", "GpuMemoryAlmostFull", "GpuHot", "GpuEccUncorrectedErrors")

# phase: (GPU-Util %, SM active %, SM occupancy %, tensor active %, DRAM active %, clock-event mask,
#         top thread CPU %); the last three rows from the H200 fault runs (docs/doctor-accuracy-h200.md)
H200 = {
    "idle": (0, 0.0, 0.0, 0.0, 0.0, 0x1, 1.0),
    "naive": (2, 0.9, 0.2, 0.0, 0.0, 0x0, 99.0),
    "batched fp32": (100, 95.5, 18.5, 0.2, 15.9, 0x4, 60.0),
    "bf16": (97, 87.5, 51.6, 27.1, 32.5, 0x4, 55.0),
    "launch-bound loop": (31, 0.1, 0.0, 0.0, 0.0, 0x0, 100.0),
    "DRAM-bound elementwise": (100, 99.5, 83.0, 0.0, 90.0, 0x0, 100.0),
    "healthy BF16 GEMM": (100, 96.2, 14.0, 93.0, 20.0, 0x4, 100.0),
}


def holding(phase: str, mem_percent: float = 75.0) -> set[str]:
    util, sm, occ, tensor, dram, mask, cpu = H200[phase]
    gpu = GpuSample(index=0, uuid="GPU-6c1e", name="NVIDIA H200", gpu_util=util, temperature_c=44.0,
                    mem_used_bytes=int(mem_percent / 100 * 141 * GIB), mem_total_bytes=141 * GIB,
                    clock_event_mask=mask, ecc_uncorrected=0,
                    profiling={"gpm": Profiling(sm_active=sm, sm_occupancy=occ, tensor_active=tensor,
                                                        dram_active=dram)})
    proc = ProcessSample(pid=4242, gpu_index=0, name="python3", user="svc", top_thread_cpu_percent=cpu)
    frame = Frame(snap(0, [gpu], [proc]), 0.0)
    rules = load_rules([DEFAULT_RULES])
    return {name for name in INSTANT if build(rules.rule(name).condition).evaluate(frame)}  # type: ignore[union-attr]


@pytest.mark.parametrize(("phase", "expected"), [
    ("idle", {"GpuMemoryHeldWhileIdle"}),
    ("naive", {"GpuMemoryHeldWhileIdle", "ProcessThreadCpuBound"}),
    ("batched fp32", {"GpuTensorCoresIdleUnderLoad"}),
    ("bf16", set()),
    ("launch-bound loop", {"GpuUtilOverstatesWork", "ProcessThreadCpuBound"}),
    ("DRAM-bound elementwise", set()),
    ("healthy BF16 GEMM", set()),
])
def test_each_incident_phase_trips_the_rules_that_explain_it(phase: str, expected: set[str]) -> None:
    assert holding(phase) == expected


def test_without_the_memory_pool_an_idle_gpu_is_not_the_incident() -> None:
    assert "GpuMemoryHeldWhileIdle" not in holding("naive", mem_percent=1.0)


def _memory_trace(percents: list[float]) -> list[tuple[float, GpuSample]]:
    return [(float(t), GpuSample(index=0, uuid="GPU-6c1e", name="NVIDIA H200", gpu_util=0.0,
                                 mem_used_bytes=int(p / 100 * 141 * GIB), mem_total_bytes=141 * GIB))
            for t, p in enumerate(percents)]


def _firing_from(trace: list[tuple[float, GpuSample]], name: str) -> float | None:
    engine = AlertEngine(load_rules([DEFAULT_RULES]))
    for t, g in trace:
        engine.evaluate(snap(t, [g]))
        if any(a.name == name and a.state == "firing" for a in engine.alerts()):
            return t
    return None


def test_a_leak_of_a_third_of_a_percent_a_second_fires_within_two_minutes_and_a_full_plateau_never() -> None:
    leak = _memory_trace([10 + 0.35 * t for t in range(200)])  # ~0.5 GiB/s on an H200
    assert _firing_from(leak, "GpuMemoryLeak") == 120.0  # a whole 1m window, then 'for: 1m'
    assert _firing_from(_memory_trace([97.0] * 300), "GpuMemoryLeak") is None
    step = _memory_trace([5.0] * 30 + [80.0] * 270)  # a model load: one step, then flat
    assert _firing_from(step, "GpuMemoryLeak") is None
