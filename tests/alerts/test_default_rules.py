"""The shipped rules' conditions on GPU readings measured on an H200 (GPM counters from the probe in
shared/reference/h200-probe-2026-12-02.log, one row per phase of the incident workload; memory as held by
the incident's 75 % pool; the serving thread's CPU as py-spy/pidstat showed it)."""

from __future__ import annotations

import pytest

from alerts.build import GIB, snap
from gpuwatch.alerts import DEFAULT_RULES, load_rules
from gpuwatch.alerts.engine import build
from gpuwatch.alerts.entities import Frame
from gpuwatch.model.snapshot import GpuSample, ProcessSample, Profiling

INSTANT = ("GpuMemoryHeldWhileIdle", "GpuBusyButSmOccupancyLow", "GpuTensorCoresIdleUnderLoad",
           "ProcessThreadCpuBound", "GpuMemoryAlmostFull", "GpuHot", "GpuEccUncorrectedErrors")

# phase: (GPU-Util %, SM active %, SM occupancy %, tensor active %, clock-event mask, top thread CPU %)
H200 = {
    "idle": (0, 0.0, 0.0, 0.0, 0x1, 1.0),
    "naive": (2, 0.9, 0.2, 0.0, 0x0, 99.0),
    "batched fp32": (100, 95.5, 18.5, 0.2, 0x4, 60.0),
    "bf16": (97, 87.5, 51.6, 27.1, 0x4, 55.0),
}


def holding(phase: str, mem_percent: float = 75.0) -> set[str]:
    util, sm, occ, tensor, mask, cpu = H200[phase]
    gpu = GpuSample(index=0, uuid="GPU-6c1e", name="NVIDIA H200", gpu_util=util, temperature_c=44.0,
                    mem_used_bytes=int(mem_percent / 100 * 141 * GIB), mem_total_bytes=141 * GIB,
                    clock_event_mask=mask, ecc_uncorrected=0,
                    profiling={"gpm": Profiling(sm_active=sm, sm_occupancy=occ, tensor_active=tensor)})
    proc = ProcessSample(pid=4242, gpu_index=0, name="python3", user="svc", top_thread_cpu_percent=cpu)
    frame = Frame(snap(0, [gpu], [proc]), 0.0)
    rules = load_rules([DEFAULT_RULES])
    return {name for name in INSTANT if build(rules.rule(name).condition).evaluate(frame)}  # type: ignore[union-attr]


@pytest.mark.parametrize(("phase", "expected"), [
    ("idle", {"GpuMemoryHeldWhileIdle"}),
    ("naive", {"GpuMemoryHeldWhileIdle", "ProcessThreadCpuBound"}),
    ("batched fp32", {"GpuBusyButSmOccupancyLow", "GpuTensorCoresIdleUnderLoad"}),
    ("bf16", set()),
])
def test_each_incident_phase_trips_the_rules_that_explain_it(phase: str, expected: set[str]) -> None:
    assert holding(phase) == expected


def test_without_the_memory_pool_an_idle_gpu_is_not_the_incident() -> None:
    assert "GpuMemoryHeldWhileIdle" not in holding("naive", mem_percent=1.0)
