"""Each finding class on windows shaped like the H200 fault runs, and the signals that tell look-alikes
apart: one pegged thread means Python, launches or a pageable copy depending on what the GPU shows."""

from __future__ import annotations

import dataclasses

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Profiling, Snapshot

GIB = 1 << 30
TOTAL = 141 * GIB
T0 = 1_764_666_000.0


def snaps(n: int = 15, *, util: float = 0.0, sm: float = 0.0, tensor: float = 0.0, dram: float = 0.0,
          fp32: float | None = None, rx: float = 1e7, mem: list[int] | None = None,
          procs: list[ProcessSample] | None = None) -> list[Snapshot]:
    out = []
    for i in range(n):
        prof = Profiling(sm_active=sm, sm_occupancy=sm / 4, tensor_active=tensor, dram_active=dram,
                         fp32_active=fp32, pcie_rx_bytes_s=rx)
        gpu = GpuSample(index=0, uuid="GPU-1", name="NVIDIA H200", gpu_util=util,
                        mem_used_bytes=(mem[i] if mem else 2 * GIB), mem_total_bytes=TOTAL,
                        sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0, clock_event_mask=0, profiling={"gpm": prof})
        out.append(Snapshot(time=T0 + i, host=HostSample("node", cpu_count=16, cpu_percent=20.0, iowait_percent=0.0),
                            gpus=(gpu,), processes=tuple(procs or ()), seq=i))
    return out


def proc(pid: int = 500, **kw: object) -> ProcessSample:
    base = dict(pid=pid, gpu_index=0, name="python3", gpu_memory_bytes=2 * GIB, cpu_percent=10.0,
                top_thread_cpu_percent=10.0, top_thread_id=pid, threads_running=1, threads_in_io_wait=0,
                io_read_bytes_s=0.0, io_read_chars_s=0.0, workers=0)
    base.update(kw)
    return ProcessSample(**base)  # type: ignore[arg-type]


def codes(window: list[Snapshot]) -> tuple[str | None, list[str]]:
    findings = diagnose(window)
    top = top_problem(findings)
    return (top.code if top else None), [f.code for f in findings]


def test_a_pegged_thread_with_gpu_util_far_above_sm_activity_is_launch_bound() -> None:
    top, found = codes(snaps(util=28, sm=0.1, procs=[proc(cpu_percent=100, top_thread_cpu_percent=100)]))
    assert top == "launch_bound" and "input_cpu_bound" not in found


def test_a_pegged_thread_with_pcie_busy_is_a_pageable_copy_not_python() -> None:
    top, found = codes(snaps(util=18, sm=0.6, rx=8.8e9, procs=[proc(cpu_percent=100, top_thread_cpu_percent=100)]))
    assert top == "h2d_copies" and not {"input_cpu_bound", "launch_bound"} & set(found)


def test_a_pegged_thread_with_an_idle_gpu_is_python_work() -> None:
    assert codes(snaps(util=1, sm=0.3, procs=[proc(cpu_percent=100, top_thread_cpu_percent=100)]))[0] == \
        "input_cpu_bound"


def test_a_sleeping_process_that_reads_while_the_gpu_idles_waits_off_the_cpu() -> None:
    reader = proc(cpu_percent=7, top_thread_cpu_percent=7, threads_running=0, io_read_bytes_s=1e8,
                  io_read_chars_s=1e8, wait_channel="folio_wait_bit_common")
    top, _ = codes(snaps(util=0, sm=0.1, procs=[reader]))
    assert top == "off_cpu_wait"
    finding = diagnose(snaps(util=0, sm=0.1, procs=[reader]))[0]
    assert any("100 MB/s" in e for e in finding.evidence) and any("folio_wait" in e for e in finding.evidence)


def test_an_idle_process_that_reads_nothing_is_not_waiting_but_idle() -> None:
    idle = proc(cpu_percent=0, top_thread_cpu_percent=0, threads_running=0, gpu_memory_bytes=28 * GIB, sm_util=0.0,
                wait_channel="hrtimer_nanosleep")
    top, found = codes(snaps(util=0, sm=0, procs=[idle], mem=[28 * GIB] * 15))
    assert top == "memory_idle" and "off_cpu_wait" not in found


def test_busy_loader_workers_behind_an_idle_gpu_are_the_bottleneck() -> None:
    main = proc(cpu_percent=30, top_thread_cpu_percent=25, workers=2, workers_cpu_percent=198, workers_busy=2)
    top, found = codes(snaps(util=0, sm=0, procs=[main]))
    assert top == "dataloader_bound" and "off_cpu_wait" not in found


def test_memory_climbing_a_gib_a_second_is_a_leak_with_time_to_full() -> None:
    mem = [10 * GIB + i * GIB for i in range(15)]
    findings = diagnose(snaps(procs=[proc(gpu_memory_bytes=m) for m in mem[-1:]], mem=mem))
    assert findings[0].code == "memory_leak" and findings[0].severity == "critical"
    assert any("full in about" in e for e in findings[0].evidence)
    assert "memory_idle" not in [f.code for f in findings]


def test_a_staircase_that_never_gives_memory_back_is_a_leak() -> None:
    mem = [10 * GIB + 2 * GIB * (i // 6) for i in range(15)]  # +2 GiB every 6 s
    assert codes(snaps(util=30, sm=20, mem=mem))[0] == "memory_leak"


def test_memory_climbing_while_pcie_brings_the_bytes_in_is_a_model_load_not_a_leak() -> None:
    mem = [GIB * v for v in range(1, 106, 7)]  # 7 GiB/s for 15 s
    assert "memory_leak" not in codes(snaps(util=10, sm=2, rx=8e9, mem=mem))[1]


def test_memory_that_rises_and_falls_by_gigabytes_is_churn() -> None:
    mem = [GIB * v for v in (2, 47, 2, 2, 2, 47, 2, 2, 2, 47, 2, 2, 2, 47, 2)]
    assert codes(snaps(util=5, sm=2, mem=mem))[0] == "memory_churn"


def test_a_model_load_then_a_steady_level_is_neither_leak_nor_churn() -> None:
    mem = [GIB * v for v in (1, 30, 60, 90, 105) + (105,) * 10]
    _, found = codes(snaps(util=95, sm=90, tensor=40, mem=mem))
    assert not {"memory_leak", "memory_churn"} & set(found)


def test_processes_taking_turns_on_a_busy_gpu_are_time_slicing() -> None:
    three = [proc(pid, cpu_percent=100, top_thread_cpu_percent=100, sm_util=33.0) for pid in (836, 837, 838)]
    top, found = codes(snaps(util=100, sm=88, tensor=68, procs=three))
    assert top == "time_slicing" and "healthy" not in found


def test_dram_saturated_elementwise_work_is_bandwidth_not_fp32() -> None:
    top, found = codes(snaps(util=100, sm=99.5, tensor=0, dram=90, fp32=1))
    assert top == "memory_bandwidth_bound" and "fp32_no_tensor" not in found


def test_fp32_matmuls_keep_the_fp32_pipe_busy_with_tensor_cores_idle() -> None:
    assert codes(snaps(util=100, sm=96.6, tensor=0, dram=5, fp32=76))[0] == "fp32_no_tensor"


def test_a_healthy_bf16_gemm_with_low_occupancy_gets_no_warning() -> None:
    findings = diagnose(snaps(util=100, sm=96, tensor=93, dram=20, procs=[proc(cpu_percent=100,
                                                                              top_thread_cpu_percent=100)]))
    assert [f.code for f in findings] == ["healthy"]


def test_an_idle_holder_is_named_even_while_another_process_keeps_the_gpu_busy() -> None:
    holder = proc(603, cpu_percent=0, top_thread_cpu_percent=0, gpu_memory_bytes=104 * GIB, sm_util=0.0)
    busy = proc(558, cpu_percent=100, top_thread_cpu_percent=100, sm_util=40.0)
    window = snaps(util=37, sm=34, procs=[busy, holder])
    findings = diagnose(window, pid=603)
    assert findings[0].code == "memory_idle" and findings[0].pid == 603
    assert any("104.0 GiB" in e for e in findings[0].evidence)
    assert {f.code for f in diagnose(window)} >= {"input_cpu_bound", "memory_idle"}


def test_a_holder_seen_once_or_without_a_cpu_rate_is_not_called_idle() -> None:
    """Its first sample has no CPU rate yet: a dashboard's first evaluation warned on one sample, and the
    hysteresis then showed that warning for half a window."""
    busy = proc(558, cpu_percent=9, top_thread_cpu_percent=8, sm_util=15.0)
    unmeasured = proc(603, cpu_percent=None, top_thread_cpu_percent=None, gpu_memory_bytes=2 * GIB, sm_util=0.0)
    assert "memory_idle" not in [f.code for f in diagnose(snaps(util=26, sm=16, procs=[busy, unmeasured]))]
    idle = proc(603, cpu_percent=0, top_thread_cpu_percent=0, gpu_memory_bytes=2 * GIB, sm_util=0.0)
    assert "memory_idle" not in [f.code for f in diagnose(snaps(1, util=26, sm=16, procs=[busy, idle]))]
    assert "memory_idle" in [f.code for f in diagnose(snaps(util=26, sm=16, procs=[busy, idle]))]


def test_thermal_slowdown_is_a_warning_and_power_cap_under_full_load_only_info() -> None:
    hot = [dataclasses.replace(s, gpus=(dataclasses.replace(s.gpus[0], sm_clock_mhz=1200.0, clock_event_mask=0x40),))
           for s in snaps(util=99, sm=92, tensor=40)]
    capped = [dataclasses.replace(s, gpus=(dataclasses.replace(s.gpus[0], sm_clock_mhz=1530.0, clock_event_mask=0x4),))
              for s in snaps(util=100, sm=96, tensor=78)]
    assert next((f.code, f.severity) for f in diagnose(hot)) == ("throttled", "warning")
    assert {(f.code, f.severity) for f in diagnose(capped)} == {("healthy", "info"), ("throttled", "info")}
