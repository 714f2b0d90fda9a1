"""The process lists and per-process utilisation in one driver call each (``direct.py``): the same rows as
pynvml's two-call wrappers give, one call while the buffer fits, and pynvml's function wherever the direct
one cannot be had or answers what a wrong call of ours would."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest
from fakes.fake_pynvml import FakeClock, FakeNvml, FakeProcess, make_fake_nvml

from gpuwatch.sources.nvml import NvmlSource
from gpuwatch.sources.nvml.direct import START_ENTRIES
from gpuwatch.sources.nvml.processes import LISTS_EVERY_S

COMPUTE = "nvmlDeviceGetComputeRunningProcesses_v3"
UTIL = "nvmlDeviceGetProcessUtilization"


def fake_with(procs: list[FakeProcess], *, direct: bool = True) -> FakeNvml:
    fake = make_fake_nvml(processes_per_gpu=0)
    fake.gpus[0].processes = procs
    if not direct:
        fake.hide("_nvmlGetFunctionPointer")
    return fake


def table(fake: FakeNvml, ticks: int = 1, step: float = 1.0) -> list[tuple[Any, ...]]:
    clock = FakeClock()
    source = NvmlSource(nvml=fake, clock=clock, health_interval=0)
    for _ in range(ticks):
        reading = source.poll(clock.advance(step), ())
    source.close()
    return sorted((p.pid, p.gpu_memory_bytes, p.sm_util, p.mem_util, p.kind) for p in reading.processes)


def mixed() -> list[FakeProcess]:
    return [FakeProcess(pid=11, used_memory=2**30, sm_util=60, mem_util=20),
            FakeProcess(pid=12, used_memory=None, sm_util=0),
            FakeProcess(pid=13, used_memory=3 * 2**28, kind="compute+graphics", sm_util=5, mem_util=1),
            FakeProcess(pid=14, used_memory=2**26, kind="graphics")]


def test_the_direct_calls_give_the_rows_pynvml_gives() -> None:
    direct, wrapped = fake_with(mixed()), fake_with(mixed(), direct=False)
    assert table(direct) == table(wrapped)
    assert direct.driver_calls[COMPUTE] == 1 and direct.driver_calls[UTIL] == 1
    assert sum(wrapped.driver_calls.values()) == 0  # a binding without the lookup: pynvml's functions


def test_each_list_and_each_utilisation_ask_is_one_driver_call_while_the_buffer_fits() -> None:
    fake = fake_with([FakeProcess(pid=20 + i, sm_util=10) for i in range(4)])
    ticks = 4
    assert len(table(fake, ticks, step=LISTS_EVERY_S)) == 4  # the lists are due on every tick
    assert fake.driver_calls[COMPUTE] == fake.calls["nvmlDeviceGetComputeRunningProcesses"] == ticks
    assert fake.driver_calls[UTIL] == fake.calls[UTIL] == ticks  # one ask a tick here, one call each


def test_more_processes_than_the_buffer_holds_grow_it_once_and_every_one_is_listed() -> None:
    n = 3 * START_ENTRIES
    fake = fake_with([FakeProcess(pid=1000 + i, used_memory=(i + 1) * 2**20, sm_util=1 + i % 50) for i in range(n)])
    ticks = 3
    rows = table(fake, ticks, step=LISTS_EVERY_S)
    assert [r[0] for r in rows] == list(range(1000, 1000 + n))
    assert [r[1] for r in rows] == [(i + 1) * 2**20 for i in range(n)]
    assert [r[2] for r in rows] == [float(1 + i % 50) for i in range(n)]
    assert fake.driver_calls[COMPUTE] == ticks + 1  # the first call found it too small
    assert fake.driver_calls[UTIL] == ticks + 1


def test_an_answer_a_wrong_call_of_ours_could_cause_falls_back_to_pynvml_for_good() -> None:
    fake = fake_with(mixed())
    fake.inject("nvmlDeviceGetComputeRunningProcesses", pynvml.NVML_ERROR_INVALID_ARGUMENT, times=1)
    rows = table(fake, ticks=3)
    assert rows == table(fake_with(mixed(), direct=False), ticks=3)  # the first tick used pynvml's answer
    assert fake.driver_calls[COMPUTE] == 1  # given up after that one


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_UNKNOWN, pynvml.NVML_ERROR_NO_PERMISSION])
def test_any_other_answer_is_raised_as_pynvml_raises_it(code: int) -> None:
    fake = fake_with(mixed())
    fake.inject("nvmlDeviceGetComputeRunningProcesses", code, times=1)
    clock = FakeClock()
    source = NvmlSource(nvml=fake, clock=clock, health_interval=0)
    first = source.poll(clock.advance(1), ())
    second = source.poll(clock.advance(1), ())
    source.close()
    transient = code == pynvml.NVML_ERROR_UNKNOWN
    assert {p.pid for p in first.processes} == {13, 14}  # the graphics list alone, as with pynvml's error
    assert {p.pid for p in second.processes} == ({11, 12, 13, 14} if transient else {13, 14})
    assert fake.driver_calls[COMPUTE] == (2 if transient else 1)  # NoPermission: not asked again


def test_a_driver_without_the_v3_symbol_uses_pynvml_and_its_fallback_to_v2() -> None:
    fake = make_fake_nvml(processes_per_gpu=3, missing={COMPUTE, "nvmlDeviceGetGraphicsRunningProcesses_v3"})
    assert len(table(fake, ticks=2, step=LISTS_EVERY_S)) == 3
    assert fake.driver_calls[COMPUTE] == 0 and fake.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 2
