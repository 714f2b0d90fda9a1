"""The NVML source on a real NVIDIA GPU (run on the H200 machine: ``pytest -m gpu tests/gpu -s``).

What the H200 supports comes from ``reference/h200-probe-2026-12-02.log``: everything gpuwatch reads
except the fan (not read). GPM needs a load to show occupancy; a small BF16 matmul loop in a child
process (torch) provides it. Timings are printed and, where ``$OUT`` is set, written to
``$OUT/nvml-tick-timing.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.model.snapshot import GpuSample, Profiling
from gpuwatch.sources.nvml import NvmlSource

pytestmark = pytest.mark.gpu

#: Fields an H200 (driver 580) fills on every tick, PCIe throughput included when asked for.
H200_FIELDS = [f.name for f in dataclasses.fields(GpuSample) if f.name not in ("profiling", "extra", "labels")]
GPM_FIELDS = [f.name for f in dataclasses.fields(Profiling)]

LOAD = """
import sys, time, torch
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
(x @ x).sum().item()
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
"""


@pytest.fixture
def source() -> Iterator[NvmlSource]:
    src = NvmlSource(pcie_throughput=True, slow_interval=1.0)
    yield src
    src.close()


def two_readings(src: NvmlSource, gap: float = 0.3) -> Any:
    src.poll(time.monotonic(), ())
    time.sleep(gap)
    return src.poll(time.monotonic(), ())


def torch_python() -> str | None:
    """A Python that can run CUDA torch: $GPUWATCH_TORCH_PYTHON, this one, or python3 on PATH."""
    for candidate in (os.environ.get("GPUWATCH_TORCH_PYTHON"), sys.executable, shutil.which("python3")):
        if candidate and subprocess.run([candidate, "-c", "import torch; assert torch.cuda.is_available()"],
                                        capture_output=True, timeout=120).returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="module")
def gpu_load() -> Iterator[subprocess.Popen[str]]:
    python = torch_python()
    if python is None:
        pytest.skip("no Python with CUDA torch here (set GPUWATCH_TORCH_PYTHON)")
    child = subprocess.Popen([python, "-c", LOAD, "60"], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    yield child
    child.kill()
    child.wait()


def test_nvml_starts_and_lists_every_gpu_with_its_identity(source: NvmlSource) -> None:
    import pynvml

    reading = two_readings(source)
    assert len(reading.gpus) == pynvml.nvmlDeviceGetCount()
    for g in reading.gpus:
        print(g)
        assert g.uuid.startswith("GPU-") and g.name and g.pci_bus_id and g.driver_version
        assert g.labels == {}


def test_every_field_the_h200_supports_is_filled(source: NvmlSource) -> None:
    gpu = two_readings(source).gpus[0]
    print(gpu)
    empty = [f for f in H200_FIELDS if getattr(gpu, f) is None
             or (f == "clock_events" and gpu.clock_event_mask and not gpu.clock_events)]
    assert empty == []
    assert "gpm" in gpu.profiling, "GPM should be supported on Hopper"
    assert [f for f in GPM_FIELDS if getattr(gpu.profiling["gpm"], f) is None] == []


def test_gpm_sees_sm_occupancy_and_the_process_under_a_bf16_load(source: NvmlSource,
                                                                 gpu_load: subprocess.Popen[str]) -> None:
    occupancy, active, rows = [], [], []
    for _ in range(8):
        time.sleep(0.25)
        reading = source.poll(time.monotonic(), ())
        gpm = reading.gpus[0].profiling.get("gpm")
        occupancy.append(gpm.sm_occupancy if gpm else None)
        active.append(gpm.sm_active if gpm else None)
        rows = list(reading.processes)
    print("sm_occupancy", occupancy, "sm_active", active)
    print("processes", rows)
    assert max(v for v in occupancy if v is not None) > 0
    assert max(v for v in active if v is not None) > 0
    mine = [p for p in rows if p.pid == gpu_load.pid]
    assert rows, "the loaded GPU lists no process"
    if mine:  # the same PID namespace as NVML
        assert mine[0].gpu_memory_bytes and mine[0].sm_util is not None


def test_gpuwatch_snapshot_json_shows_occupancy_under_load(gpu_load: subprocess.Popen[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "gpuwatch", "snapshot", "--json", "--interval", "0.5"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["gpus"][0]["profiling"]["gpm"]["sm_occupancy"] > 0
    assert doc["processes"]


def _bare_round(nvml: Any, handles: list[Any], samples: list[tuple[Any, Any]], mg: Any) -> None:
    """The getters one tick makes, called directly."""
    for h, (a, b) in zip(handles, samples, strict=True):
        nvml.nvmlDeviceGetUtilizationRates(h)
        nvml.nvmlDeviceGetMemoryInfo(h, nvml.nvmlMemory_v2)
        nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)
        nvml.nvmlDeviceGetPowerUsage(h)
        nvml.nvmlDeviceGetEnforcedPowerLimit(h)
        nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)
        nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM)
        nvml.nvmlDeviceGetPerformanceState(h)
        nvml.nvmlDeviceGetCurrentClocksEventReasons(h)
        nvml.nvmlDeviceGetCurrPcieLinkGeneration(h)
        nvml.nvmlDeviceGetCurrPcieLinkWidth(h)
        nvml.nvmlDeviceGetComputeRunningProcesses(h)
        nvml.nvmlDeviceGetGraphicsRunningProcesses(h)
        try:
            nvml.nvmlDeviceGetProcessUtilization(h, int(time.time() * 1e6) - 1_000_000)
        except nvml.NVMLError:
            pass
        nvml.nvmlGpmSampleGet(h, b)
        mg.sample1, mg.sample2 = a, b
        nvml.nvmlGpmMetricsGet(mg)


def test_tick_timing_against_the_bare_getters(source: NvmlSource) -> None:
    import pynvml as nvml

    gap = 0.11  # > 100 ms, so every tick takes a GPM sample
    ticks = []
    for _ in range(30):
        time.sleep(gap)
        t0 = time.perf_counter()
        source.poll(time.monotonic(), ())
        ticks.append(time.perf_counter() - t0)
    handles = [nvml.nvmlDeviceGetHandleByIndex(g.device.index) for g in source.gpus]
    samples = [(nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()) for _ in handles]
    for h, (a, _) in zip(handles, samples, strict=True):
        nvml.nvmlGpmSampleGet(h, a)
    mg = nvml.c_nvmlGpmMetricsGet_t()
    mg.version, mg.numMetrics = nvml.NVML_GPM_METRICS_GET_VERSION, 10
    for i, metric in enumerate((1, 2, 3, 5, 10, 11, 12, 13, 20, 21)):
        mg.metrics[i].metricId = metric
    bare = []
    try:
        for _ in range(30):
            time.sleep(gap)
            t0 = time.perf_counter()
            _bare_round(nvml, handles, samples, mg)
            bare.append(time.perf_counter() - t0)
    finally:
        for a, b in samples:
            nvml.nvmlGpmSampleFree(a)
            nvml.nvmlGpmSampleFree(b)
    result = {"gpus": len(handles), "tick_median_us": statistics.median(ticks) * 1e6,
              "tick_p90_us": sorted(ticks)[int(0.9 * len(ticks))] * 1e6,
              "bare_median_us": statistics.median(bare) * 1e6,
              "ratio_median": statistics.median(ticks) / statistics.median(bare)}
    print(json.dumps(result, indent=1))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "nvml-tick-timing.json").write_text(json.dumps(result, indent=1))
    assert statistics.median(ticks) < 0.005 * len(handles)  # sanity: a tick stays in the milliseconds


def test_close_releases_nvml_and_a_new_source_opens() -> None:
    first = NvmlSource()
    first.close()
    second = NvmlSource()
    try:
        assert two_readings(second).gpus[0].gpu_util is not None
    finally:
        second.close()


def test_the_direct_process_calls_answer_as_pynvml_does_and_in_one_driver_call(
        source: NvmlSource, gpu_load: subprocess.Popen[str]) -> None:
    """The process list and per-process utilisation called directly (``direct.py``) against pynvml's own
    wrappers on the same GPU, one after the other, with the time of each (median of 20)."""
    import pynvml as nvml

    from gpuwatch.sources.nvml.direct import ProcessList, Utilisation

    gpu = source.gpus[0]
    handle = gpu.device.handle
    compute, util = gpu.procs._compute.fn, gpu.procs._util.fn
    assert isinstance(compute, ProcessList) and isinstance(util, Utilisation), "the direct path is not in use"
    time.sleep(1.0)
    since = int(time.time() * 1e6) - 2_000_000
    ours = sorted(compute(handle))
    theirs = sorted((int(p.pid), p.usedGpuMemory) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle))
    assert ours == theirs and ours, (ours, theirs)
    ours_util = {s[0] for s in util(handle, since)}
    theirs_util = {int(s.pid) for s in nvml.nvmlDeviceGetProcessUtilization(handle, since)}
    assert ours_util == theirs_util and ours_util, (ours_util, theirs_util)

    def median_us(fn: Any, *args: Any) -> float:
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            try:
                fn(*args)
            except nvml.NVMLError:
                pass
            times.append(time.perf_counter() - t0)
        return round(statistics.median(times) * 1e6, 1)

    timing = {"compute_list_direct_us": median_us(compute, handle),
              "compute_list_pynvml_us": median_us(nvml.nvmlDeviceGetComputeRunningProcesses, handle),
              "utilization_direct_us": median_us(util, handle, since),
              "utilization_pynvml_us": median_us(nvml.nvmlDeviceGetProcessUtilization, handle, since),
              "still_direct": compute.on and util.on}
    print(json.dumps(timing, indent=1))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "nvml-direct-calls.json").write_text(json.dumps(timing, indent=1))
    assert timing["still_direct"]


def test_the_energy_counter_through_its_getter_and_through_field_values(source: NvmlSource) -> None:
    """Data for the slow cadence (energy is its dearest read, ~4 ms): the same counter asked as a field value,
    each timed (median of 10); both must agree within 1 kJ (over a second at 700 W)."""
    import pynvml as nvml

    from gpuwatch.sources.nvml.health import field_value

    handle = source.gpus[0].device.handle

    def timed(fn: Any) -> tuple[float, Any]:
        times, value = [], None
        for _ in range(10):
            t0 = time.perf_counter()
            value = fn()
            times.append(time.perf_counter() - t0)
        return round(statistics.median(times) * 1e6, 1), value

    getter_us, getter_mj = timed(lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
    field_us, fields = timed(lambda: nvml.nvmlDeviceGetFieldValues(handle, [nvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION]))
    field_mj = field_value(fields[0]) if int(fields[0].nvmlReturn) == nvml.NVML_SUCCESS else None
    timing = {"getter_us": getter_us, "field_value_us": field_us, "getter_mj": getter_mj, "field_mj": field_mj}
    print(json.dumps(timing, indent=1))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "nvml-energy.json").write_text(json.dumps(timing, indent=1))
    if field_mj is not None:
        assert abs(field_mj - getter_mj) < 1000 * 1000  # under 1 kJ apart: one counter, read twice
