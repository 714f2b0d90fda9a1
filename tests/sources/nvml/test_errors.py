"""NvmlSource turns every NVML error into the documented reaction; only whole-backend failures escape poll."""

from __future__ import annotations

import time
from typing import Any

import pynvml
import pytest
from fakes.fake_pynvml import FakeClock, FakeNvml, make_fake_nvml

from gpuwatch.sources.base import SourceUnavailable
from gpuwatch.sources.nvml import NvmlBackendError, NvmlSource
from gpuwatch.sources.nvml.getters import RARE_EVERY_S


def open_source(fake: FakeNvml, **kwargs: Any) -> tuple[NvmlSource, FakeClock]:
    clock = FakeClock()
    return NvmlSource(nvml=fake, clock=clock, **kwargs), clock


# -- a getter NVML will never answer: cached per (GPU, getter), value None, never asked again -------------------
NEVER_ANSWERS = [
    ("nvmlDeviceGetTemperature", pynvml.NVML_ERROR_NOT_SUPPORTED, "temperature_c"),
    ("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NO_PERMISSION, "power_w"),
    ("nvmlDeviceGetEnforcedPowerLimit", pynvml.NVML_ERROR_NOT_SUPPORTED, "power_limit_w"),
    ("nvmlDeviceGetCurrPcieLinkGeneration", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, "pcie_link_gen"),
    ("nvmlDeviceGetTotalEnergyConsumption", pynvml.NVML_ERROR_NOT_SUPPORTED, "energy_j"),
    ("nvmlDeviceGetUtilizationRates", pynvml.NVML_ERROR_NO_PERMISSION, "gpu_util"),
]


@pytest.mark.parametrize(("call", "code", "field"), NEVER_ANSWERS, ids=[c for c, _, _ in NEVER_ANSWERS])
def test_a_getter_that_will_never_answer_reads_none_and_is_not_asked_again(call: str, code: int,
                                                                          field: str) -> None:
    fake = make_fake_nvml(gpus=2)
    fake.inject(call, code, gpu=0)
    source, clock = open_source(fake, slow_interval=1.0)
    for _ in range(4):  # ticks as far apart as the rare getters' cadence: every getter is due on each
        gpus = source.poll(clock.advance(RARE_EVERY_S), ()).gpus
    assert getattr(gpus[0], field) is None
    assert getattr(gpus[1], field) is not None  # per GPU: the other GPU still answers
    assert fake.calls[call] == 1 + 4  # GPU 0 once, GPU 1 every tick
    assert gpus[0].sm_clock_mhz == 1950.0  # the rest of GPU 0 is read as usual


def test_a_transient_error_reads_none_this_tick_and_the_getter_is_asked_again() -> None:
    fake = make_fake_nvml()
    fake.inject("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_UNKNOWN, times=1)
    source, clock = open_source(fake)
    first = source.poll(clock.advance(1), ()).gpus[0]
    second = source.poll(clock.advance(1), ()).gpus[0]
    assert (first.power_w, second.power_w) == (None, 412.345)


# -- older drivers: fall back to the older API ------------------------------------------------------------------
def test_clock_event_reasons_fall_back_to_throttle_reasons_on_an_old_driver() -> None:
    fake = make_fake_nvml(missing={"nvmlDeviceGetCurrentClocksEventReasons"})
    fake.gpus[0].clock_reasons = 0x4
    source, clock = open_source(fake)
    for _ in range(3):
        gpu = source.poll(clock.advance(1), ()).gpus[0]
    assert (gpu.clock_event_mask, gpu.clock_events) == (0x4, ("power_cap",))
    assert fake.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 1
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 3


def test_memory_info_falls_back_to_v1_where_the_driver_lacks_v2_and_then_has_no_reserved_figure() -> None:
    fake = make_fake_nvml(missing={"nvmlDeviceGetMemoryInfo_v2"})
    fake.gpus[0].mem_used_override, fake.gpus[0].mem_reserved = 2**30, 2**29
    source, clock = open_source(fake)
    gpu = source.poll(clock.advance(1), ()).gpus[0]
    assert (gpu.mem_used_bytes, gpu.mem_reserved_bytes) == (2**30 + 2**29, None)  # v1 counts reserved as used
    assert gpu.mem_total_bytes == fake.gpus[0].mem_total


# -- a lost GPU ------------------------------------------------------------------------------------------------
MEASUREMENTS = ("gpu_util", "mem_used_bytes", "temperature_c", "power_w", "sm_clock_mhz", "energy_j")


def test_a_lost_gpu_keeps_its_identity_loses_its_values_and_is_marked_lost() -> None:
    fake = make_fake_nvml(gpus=2, processes_per_gpu=2)
    source, clock = open_source(fake)
    source.poll(clock.advance(1), ())
    fake.lose_gpu(1)
    reading = source.poll(clock.advance(1), ())
    lost, fine = reading.gpus[1], reading.gpus[0]
    assert (lost.index, lost.uuid, lost.name, lost.pci_bus_id) == (1, fake.gpus[1].uuid, "NVIDIA H200",
                                                                  fake.gpus[1].pci_bus_id)
    assert all(getattr(lost, f) is None for f in MEASUREMENTS) and lost.profiling == {}
    assert lost.lost and not fine.lost and lost.labels == {}
    assert fine.labels == {} and fine.temperature_c == 37.0
    assert {p.gpu_index for p in reading.processes} == {0}


def test_a_lost_gpu_is_not_polled_again() -> None:
    fake = make_fake_nvml(gpus=2)
    source, clock = open_source(fake)
    fake.lose_gpu(1)
    source.poll(clock.advance(1), ())
    calls = fake.calls["nvmlDeviceGetUtilizationRates"]
    for _ in range(3):
        assert source.poll(clock.advance(1), ()).gpus[1].lost
    assert fake.calls["nvmlDeviceGetUtilizationRates"] == calls + 3  # GPU 0 only


def test_a_gpu_lost_before_start_is_listed_as_lost_and_the_others_sampled() -> None:
    fake = make_fake_nvml(gpus=2)
    fake.lose_gpu(0)
    source, clock = open_source(fake)
    gpus = source.poll(clock.advance(1), ()).gpus
    assert [g.lost for g in gpus] == [True, False]
    assert gpus[1].gpu_util == 97.0


def test_a_gpu_lost_during_gpm_frees_its_samples() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    fake.inject("nvmlGpmSampleGet", pynvml.NVML_ERROR_GPU_IS_LOST)
    assert source.poll(clock.advance(1), ()).gpus[0].lost
    assert fake.gpm_live == {}


# -- NVML shut down under us; driver changed under us ------------------------------------------------------------
def test_nvml_shut_down_by_someone_else_is_initialised_again_and_the_tick_succeeds() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    fake.uninitialize()
    gpu = source.poll(clock.advance(1), ()).gpus[0]
    assert gpu.temperature_c == 37.0
    assert fake.calls["nvmlInit"] == 2 and fake.initialized
    assert len(fake.gpm_live) == 3  # the old samples were freed and new ones taken


def test_nvml_that_stays_uninitialised_fails_the_backend_with_a_restart_hint() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    fake.inject("nvmlDeviceGetUtilizationRates", pynvml.NVML_ERROR_UNINITIALIZED)
    with pytest.raises(NvmlBackendError, match="restart gpuwatch"):
        source.poll(clock.advance(1), ())
    assert fake.calls["nvmlInit"] == 2  # re-initialised once, not in a loop


def test_a_driver_upgraded_under_the_process_fails_the_backend_saying_restart() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    fake.inject("nvmlDeviceGetTemperature", pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    with pytest.raises(NvmlBackendError, match="restart gpuwatch"):
        source.poll(clock.advance(1), ())


# -- NVML cannot start: SourceUnavailable with one sentence -------------------------------------------------------
INIT_FAILURES = [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver found (libnvidia-ml.so.1 could not be loaded)"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "kernel driver is not loaded"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "differ in version"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "no permission"),
    (pynvml.NVML_ERROR_UNKNOWN, "NVML could not start"),
]


@pytest.mark.parametrize(("code", "message"), INIT_FAILURES, ids=[m[:24] for _, m in INIT_FAILURES])
def test_nvml_that_cannot_start_raises_source_unavailable_with_one_clear_sentence(code: int, message: str) -> None:
    with pytest.raises(SourceUnavailable) as info:
        NvmlSource(nvml=make_fake_nvml(init_error=code))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_driver_with_no_gpus_is_unavailable() -> None:
    fake = make_fake_nvml(gpus=0)
    with pytest.raises(SourceUnavailable, match="reports no GPUs"):
        NvmlSource(nvml=fake)
    assert fake.refcount == 0  # shut down again


def test_a_gpu_that_cannot_be_opened_for_permission_is_left_out() -> None:
    fake = make_fake_nvml(gpus=2)
    fake.inject("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_NO_PERMISSION, times=1)
    source, clock = open_source(fake)
    assert [g.index for g in source.poll(clock.advance(1), ()).gpus] == [1]


def test_close_shuts_nvml_down_and_is_safe_twice() -> None:
    fake = make_fake_nvml()
    source, _ = open_source(fake)
    source.close()
    source.close()
    assert fake.refcount == 0 and fake.calls["nvmlShutdown"] == 1


def test_close_during_a_hung_call_frees_nothing_and_the_late_poll_does_not_touch_gpm() -> None:
    import threading

    fake = make_fake_nvml()
    source, clock = open_source(fake)
    released = fake.hang("nvmlDeviceGetTemperature")
    outcome: list[BaseException | None] = []

    def poll() -> None:
        try:
            source.poll(clock.advance(1), ())
            outcome.append(None)
        except BaseException as exc:  # recorded for the assertion below
            outcome.append(exc)

    worker = threading.Thread(target=poll)
    calls = fake.calls["nvmlDeviceGetTemperature"]
    worker.start()
    while fake.calls["nvmlDeviceGetTemperature"] == calls:  # until the poll is inside the hung call
        time.sleep(0.005)
    source.close(wait_s=0.1)
    assert len(fake.gpm_live) == 3 and fake.refcount == 1  # not freed under the hung call
    released.set()
    worker.join(5)
    assert outcome == [None]
    with pytest.raises(NvmlBackendError, match="closed"):
        source.poll(clock.advance(1), ())
