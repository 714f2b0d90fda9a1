"""Processes on the GPUs: one row per (process, GPU), GPU memory, and SM/memory utilisation per process."""

from __future__ import annotations

import time
from typing import Any

import pynvml
import pytest
from fakes.fake_pynvml import FakeClock, FakeNvml, FakeProcess, make_fake_nvml

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.sources.nvml import NvmlSource
from gpuwatch.sources.nvml.processes import LISTS_EVERY_S, UTIL_MIN_PERIOD_S


def open_source(fake: FakeNvml, **kwargs: Any) -> tuple[NvmlSource, FakeClock]:
    clock = FakeClock()
    return NvmlSource(nvml=fake, clock=clock, **kwargs), clock


def rows(source: NvmlSource, now: float) -> dict[tuple[int, int], ProcessSample]:
    return {(p.pid, p.gpu_index): p for p in source.poll(now, ()).processes}


def one_gpu_with(*procs: FakeProcess, **options: Any) -> FakeNvml:
    fake = make_fake_nvml(processes_per_gpu=0, **options)
    fake.gpus[0].processes = list(procs)
    return fake


def test_each_process_is_a_row_with_its_gpu_memory_and_utilisation() -> None:
    fake = one_gpu_with(FakeProcess(pid=471, used_memory=1_126_170_624, sm_util=96, mem_util=32))
    source, clock = open_source(fake)
    (row,) = rows(source, clock.advance(1)).values()
    assert (row.pid, row.gpu_index, row.gpu_memory_bytes, row.sm_util, row.mem_util, row.kind) == (
        471, 0, 1_126_170_624, 96.0, 32.0, "compute")


def test_a_process_on_two_gpus_is_two_rows() -> None:
    fake = make_fake_nvml(gpus=2, processes_per_gpu=0)
    fake.gpus[0].processes = [FakeProcess(pid=7, used_memory=2**30, sm_util=10)]
    fake.gpus[1].processes = [FakeProcess(pid=7, used_memory=2**31, sm_util=80)]
    source, clock = open_source(fake)
    found = rows(source, clock.advance(1))
    assert {k: (p.gpu_memory_bytes, p.sm_util) for k, p in found.items()} == {
        (7, 0): (2**30, 10.0), (7, 1): (2**31, 80.0)}


KINDS = [
    ("compute", "compute"),
    ("graphics", "graphics"),
    ("compute+graphics", "compute+graphics"),
]


@pytest.mark.parametrize(("listed_as", "kind"), KINDS)
def test_compute_and_graphics_lists_merge_into_one_row_per_pid(listed_as: str, kind: str) -> None:
    fake = one_gpu_with(FakeProcess(pid=9, used_memory=2**30, kind=listed_as))
    source, clock = open_source(fake)
    found = rows(source, clock.advance(1))
    assert list(found) == [(9, 0)] and found[(9, 0)].kind == kind
    assert found[(9, 0)].gpu_memory_bytes == 2**30


def test_memory_nvml_cannot_report_is_none() -> None:
    fake = one_gpu_with(FakeProcess(pid=5, used_memory=None))
    source, clock = open_source(fake)
    assert rows(source, clock.advance(1))[(5, 0)].gpu_memory_bytes is None


def test_a_driver_without_the_v3_process_call_falls_back_to_v2() -> None:
    fake = make_fake_nvml(processes_per_gpu=3, missing={"nvmlDeviceGetComputeRunningProcesses_v3",
                                                        "nvmlDeviceGetGraphicsRunningProcesses_v3"})
    source, clock = open_source(fake)
    for _ in range(2):  # ticks as far apart as the lists' cadence: the lists are due on each
        found = rows(source, clock.advance(LISTS_EVERY_S))
    assert len(found) == 3
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 1  # mismatch seen once, then v2 only
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 2


def test_process_lists_nvml_refuses_give_no_rows_and_the_gpu_is_still_sampled() -> None:
    fake = make_fake_nvml(processes_per_gpu=2)
    fake.inject("nvmlDeviceGetComputeRunningProcesses", pynvml.NVML_ERROR_NO_PERMISSION)
    source, clock = open_source(fake)
    reading = source.poll(clock.advance(1), ())
    assert reading.processes == () and reading.gpus[0].gpu_util == 97.0


# -- the process lists: asked when the GPU's used memory changed, else every LISTS_EVERY_S ----------------------
def ticks_until_shown(source: NvmlSource, clock: FakeClock, pid: int, limit: int = 30) -> int:
    for tick in range(1, limit + 1):
        if (pid, 0) in rows(source, clock.advance(1)):
            return tick
    return limit + 1


@pytest.mark.parametrize("kind", ["compute", "graphics", "compute+graphics"])
def test_a_process_that_takes_memory_shows_on_the_next_tick(kind: str) -> None:
    fake = make_fake_nvml(processes_per_gpu=2)
    source, clock = open_source(fake)
    for _ in range(3):
        rows(source, clock.advance(1))
    fake.gpus[0].processes.append(FakeProcess(pid=77, used_memory=2**28, kind=kind))  # the GPU's used memory
    assert ticks_until_shown(source, clock, 77) == 1                                 # grows
    assert rows(source, clock.advance(1))[(77, 0)].kind == kind


def test_a_process_that_exits_is_gone_on_the_next_tick() -> None:
    fake = make_fake_nvml(processes_per_gpu=3)
    source, clock = open_source(fake)
    for _ in range(3):
        rows(source, clock.advance(1))
    gone = fake.gpus[0].processes.pop()
    assert (gone.pid, 0) not in rows(source, clock.advance(1))


def test_a_change_of_a_process_memory_shows_on_the_next_tick() -> None:
    fake = make_fake_nvml(processes_per_gpu=2)
    source, clock = open_source(fake)
    for _ in range(3):
        rows(source, clock.advance(1))
    fake.gpus[0].processes[0].used_memory = 5 * 2**30
    pid = fake.gpus[0].processes[0].pid
    assert rows(source, clock.advance(1))[(pid, 0)].gpu_memory_bytes == 5 * 2**30


def test_a_process_shows_within_the_lists_period_even_when_used_memory_did_not_change() -> None:
    fake = make_fake_nvml(processes_per_gpu=2)
    fake.gpus[0].mem_used_override = 40 * 2**30  # another process freed as much as the new one took
    source, clock = open_source(fake)
    for _ in range(2):
        rows(source, clock.advance(1))
    fake.gpus[0].processes.append(FakeProcess(pid=78, used_memory=2**28, kind="graphics"))
    assert ticks_until_shown(source, clock, 78) <= LISTS_EVERY_S


def test_the_lists_are_asked_once_per_period_while_used_memory_stays_put_and_every_tick_while_it_moves() -> None:
    fake = make_fake_nvml(processes_per_gpu=2)
    source, clock = open_source(fake)
    ticks = round(3 * LISTS_EVERY_S)
    for _ in range(ticks):
        rows(source, clock.advance(1))
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 3
    assert fake.calls["nvmlDeviceGetGraphicsRunningProcesses"] == 3
    for step in range(ticks):
        fake.gpus[0].processes[0].used_memory = 2**30 + step * 2**20  # an allocator that keeps growing
        rows(source, clock.advance(1))
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 3 + ticks


@pytest.mark.parametrize("call", ["nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"])
def test_a_list_that_failed_is_asked_again_on_the_next_tick(call: str) -> None:
    fake = make_fake_nvml(processes_per_gpu=2)
    fake.inject(call, pynvml.NVML_ERROR_UNKNOWN, times=1)
    source, clock = open_source(fake)
    first = rows(source, clock.advance(1))
    second = rows(source, clock.advance(1))
    assert fake.calls[call] == 2
    assert len(second) == 2 and len(first) == (0 if "Compute" in call else 2)


def test_where_used_memory_is_unknown_the_lists_are_asked_every_tick() -> None:
    fake = make_fake_nvml(processes_per_gpu=2)
    fake.inject("nvmlDeviceGetMemoryInfo", pynvml.NVML_ERROR_NOT_SUPPORTED)
    source, clock = open_source(fake)
    for _ in range(4):
        rows(source, clock.advance(1))
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 4


# -- per-process utilisation ---------------------------------------------------------------------------------
def test_an_idle_process_nvml_leaves_out_of_the_samples_reads_zero() -> None:
    fake = one_gpu_with(FakeProcess(pid=1, sm_util=50, mem_util=5), FakeProcess(pid=2, sm_util=0, mem_util=0))
    source, clock = open_source(fake)
    found = rows(source, clock.advance(1))
    assert (found[(1, 0)].sm_util, found[(2, 0)].sm_util, found[(2, 0)].mem_util) == (50.0, 0.0, 0.0)


def test_no_samples_at_all_reads_zero_for_every_process() -> None:
    fake = one_gpu_with(FakeProcess(pid=1), FakeProcess(pid=2))  # NVML raises NotFound: nobody was busy
    source, clock = open_source(fake)
    assert [p.sm_util for p in rows(source, clock.advance(1)).values()] == [0.0, 0.0]


def test_the_newest_sample_timestamp_is_carried_forward_to_the_next_call() -> None:
    fake = one_gpu_with(FakeProcess(pid=1, sm_util=40))
    first = int(time.time() * 1e6) + 5_000_000
    stamps = iter([first, first + 1_000_000])
    fake.now_us = lambda: next(stamps)
    source, clock = open_source(fake)
    rows(source, clock.advance(1))
    rows(source, clock.advance(UTIL_MIN_PERIOD_S))
    assert fake.last_args["nvmlDeviceGetProcessUtilization"][1] == first


def test_the_first_call_asks_only_for_the_last_second() -> None:
    fake = one_gpu_with(FakeProcess(pid=1, sm_util=40))
    source, clock = open_source(fake)
    rows(source, clock.advance(1))
    asked = fake.last_args["nvmlDeviceGetProcessUtilization"][1]
    assert abs(asked - (time.time() * 1e6 - 1e6)) < 5e6


HOLD = [
    ("until NVML is asked again it keeps its last value", UTIL_MIN_PERIOD_S - 0.1, 70.0),
    ("once an answer leaves it out it reads idle", UTIL_MIN_PERIOD_S + 0.1, 0.0),
]


@pytest.mark.parametrize(("case", "later", "expected"), HOLD, ids=[h[0] for h in HOLD])
def test_a_process_without_a_new_sample(case: str, later: float, expected: float) -> None:
    fake = one_gpu_with(FakeProcess(pid=3, sm_util=70, mem_util=9))
    source, clock = open_source(fake)
    rows(source, clock.advance(1))
    fake.gpus[0].processes[0].sm_util = fake.gpus[0].processes[0].mem_util = 0  # NVML: NotFound from now on
    assert rows(source, clock.advance(later))[(3, 0)].sm_util == expected


def test_utilisation_nvml_cannot_give_is_none_not_zero_and_is_not_asked_again() -> None:
    fake = one_gpu_with(FakeProcess(pid=3, sm_util=70))
    fake.inject("nvmlDeviceGetProcessUtilization", pynvml.NVML_ERROR_NOT_SUPPORTED)  # e.g. MIG
    source, clock = open_source(fake)
    for _ in range(3):
        row = rows(source, clock.advance(1))[(3, 0)]
    assert (row.sm_util, row.mem_util) == (None, None)
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 1


def test_a_process_that_exits_leaves_no_row_and_no_state() -> None:
    fake = one_gpu_with(FakeProcess(pid=1, sm_util=10), FakeProcess(pid=2, sm_util=20))
    source, clock = open_source(fake)
    rows(source, clock.advance(1))
    fake.gpus[0].processes.pop()
    assert list(rows(source, clock.advance(1))) == [(1, 0)]
    assert set(source.gpus[0].procs.seen) == {1}


def test_eight_gpus_with_256_processes_each_give_2048_rows() -> None:
    fake = make_fake_nvml(gpus=8, processes_per_gpu=256)
    source, clock = open_source(fake)
    reading = source.poll(clock.advance(1), ())
    assert len(reading.processes) == 2048 and len(reading.gpus) == 8
    assert len({(p.pid, p.gpu_index) for p in reading.processes}) == 2048


def test_utilisation_is_asked_once_per_period_whatever_the_interval_and_held_between() -> None:
    fake = one_gpu_with(FakeProcess(pid=3, sm_util=70))
    source, clock = open_source(fake)
    ticks = round(2 * UTIL_MIN_PERIOD_S / 0.1)
    seen = [rows(source, clock.advance(0.1))[(3, 0)].sm_util for _ in range(ticks)]  # two periods at 0.1 s
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 2
    assert all(v == 70.0 for v in seen)


def test_a_longer_utilisation_period_asks_less_often_and_a_change_shows_within_it() -> None:
    fake = one_gpu_with(FakeProcess(pid=3, sm_util=70))
    source, clock = open_source(fake, process_util_period_s=15.0)
    first = [rows(source, clock.advance(1.0))[(3, 0)].sm_util for _ in range(14)]
    fake.gpus[0].processes[0].sm_util = 20
    later = [rows(source, clock.advance(1.0))[(3, 0)].sm_util for _ in range(16)]
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 2  # at 1 s and at 16 s: once per 15 s
    assert set(first) == {70.0} and later[-1] == 20.0



def test_a_failed_ask_holds_the_last_shares_and_asks_again_next_tick() -> None:
    fake = one_gpu_with(FakeProcess(pid=3, sm_util=70))
    source, clock = open_source(fake)
    rows(source, clock.advance(1))
    fake.inject("nvmlDeviceGetProcessUtilization", pynvml.NVML_ERROR_UNKNOWN, times=1)
    held = rows(source, clock.advance(UTIL_MIN_PERIOD_S))[(3, 0)].sm_util  # the ask fails: no answer
    asked = fake.calls["nvmlDeviceGetProcessUtilization"]
    again = rows(source, clock.advance(0.5))[(3, 0)].sm_util
    assert held == 70.0 and again == 70.0
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == asked + 1
