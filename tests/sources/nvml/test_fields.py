"""NvmlSource reads every GpuSample field from NVML, in the model's units, on the right cadence."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pynvml
import pytest
from fakes.fake_pynvml import FakeClock, FakeNvml, make_fake_nvml

from gpuwatch.model.codec import snapshot_from_dict, snapshot_to_dict
from gpuwatch.model.snapshot import GpuSample, HostSample, Snapshot
from gpuwatch.sources.nvml import NvmlSource
from gpuwatch.sources.nvml.getters import RARE_EVERY_S


def open_source(fake: FakeNvml, **kwargs: Any) -> tuple[NvmlSource, FakeClock]:
    clock = FakeClock()
    return NvmlSource(nvml=fake, clock=clock, **kwargs), clock


def first_gpu(fake: FakeNvml, **kwargs: Any) -> GpuSample:
    source, clock = open_source(fake, **kwargs)
    gpu = source.poll(clock.advance(0.2), ()).gpus[0]
    source.close()
    return gpu


# field, fake GPU settings, expected value in model units
FIELDS = [
    ("gpu_util", {"util_gpu": 12}, 12.0),
    ("mem_util", {"util_mem": 5}, 5.0),
    ("mem_used_bytes", {"mem_used_override": 3 * 2**30}, 3 * 2**30),
    ("mem_total_bytes", {"mem_total": 80 * 2**30}, 80 * 2**30),
    ("mem_reserved_bytes", {"mem_reserved": 616 * 2**20}, 616 * 2**20),
    ("temperature_c", {"temperature": 81}, 81.0),
    ("power_w", {"power_mw": 77_721}, 77.721),
    ("power_limit_w", {"power_limit_mw": 700_000}, 700.0),
    ("sm_clock_mhz", {"sm_clock": 345}, 345.0),
    ("sm_clock_max_mhz", {"sm_clock_max": 1980}, 1980.0),
    ("mem_clock_mhz", {"mem_clock": 2619}, 2619.0),
    ("pstate", {"pstate": 2}, 2),
    ("pstate", {"pstate": 32}, None),  # NVML_PSTATE_UNKNOWN
    ("clock_event_mask", {"clock_reasons": 0x44}, 0x44),
    ("clock_events", {"clock_reasons": 0x44}, ("power_cap", "hw_thermal")),
    ("clock_events", {"clock_reasons": 0x0}, ()),
    ("pcie_link_gen", {"pcie_gen": 4}, 4),
    ("pcie_link_width", {"pcie_width": 8}, 8),
    ("energy_j", {"energy_mj": 4_069_296}, 4069.296),
    ("ecc_corrected", {"ecc_corrected": 3}, 3),
    ("ecc_uncorrected", {"ecc_uncorrected": 1}, 1),
    ("mig_mode", {"mig_mode": True}, True),
    ("mig_mode", {"mig_mode": False}, False),
    ("name", {"name": "NVIDIA H100 80GB HBM3"}, "NVIDIA H100 80GB HBM3"),
    ("uuid", {"uuid": "GPU-2ef31ce1-54e1-f5dd-f3c9-bdcccda00fcc"}, "GPU-2ef31ce1-54e1-f5dd-f3c9-bdcccda00fcc"),
    ("pci_bus_id", {"pci_bus_id": "00000000:00:06.0"}, "00000000:00:06.0"),
]


@pytest.mark.parametrize(("field", "settings", "expected"), FIELDS,
                         ids=[f"{f}={e!r}" for f, _, e in FIELDS])
def test_each_field_is_read_in_model_units(field: str, settings: dict[str, Any], expected: object) -> None:
    fake = make_fake_nvml()
    for name, value in settings.items():
        setattr(fake.gpus[0], name, value)
    assert getattr(first_gpu(fake), field) == expected


def test_driver_version_comes_from_the_system() -> None:
    assert first_gpu(make_fake_nvml(driver_version="580.159.04")).driver_version == "580.159.04"


def test_pcie_throughput_is_read_in_bytes_per_second_when_asked_for() -> None:
    fake = make_fake_nvml()
    fake.gpus[0].pcie_tx_kbs, fake.gpus[0].pcie_rx_kbs = 980, 561
    gpu = first_gpu(fake, pcie_throughput=True)
    assert (gpu.pcie_tx_bytes_s, gpu.pcie_rx_bytes_s) == (980 * 1024.0, 561 * 1024.0)


NOT_FROM_NVML_GETTERS = {"profiling", "extra", "labels"}


def test_every_model_field_is_filled_on_a_gpu_that_supports_everything() -> None:
    gpu = first_gpu(make_fake_nvml(), pcie_throughput=True)
    missing = [f.name for f in dataclasses.fields(GpuSample)
               if f.name not in NOT_FROM_NVML_GETTERS and getattr(gpu, f.name) in (None, ())]
    assert missing == []
    assert set(gpu.profiling) == {"gpm"}
    assert gpu.labels == {}


def test_each_gpu_gets_its_own_index_identity_and_values() -> None:
    fake = make_fake_nvml(gpus=3)
    for i, g in enumerate(fake.gpus):
        g.temperature = 40 + i
    source, clock = open_source(fake)
    gpus = source.poll(clock.advance(1), ()).gpus
    assert [(g.index, g.uuid, g.temperature_c) for g in gpus] == [
        (i, fake.gpus[i].uuid, 40.0 + i) for i in range(3)]


def test_a_reading_survives_the_json_round_trip() -> None:
    source, clock = open_source(make_fake_nvml(gpus=2), pcie_throughput=True)
    reading = source.poll(clock.advance(0.5), ())
    snap = Snapshot(time=1.0, host=HostSample(hostname="h"), gpus=reading.gpus, processes=reading.processes)
    assert snapshot_from_dict(snapshot_to_dict(snap)) == snap


# -- cadences ------------------------------------------------------------------------------------------------
IDENTITY_CALLS = ["nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo", "nvmlDeviceGetMaxClockInfo",
                  "nvmlSystemGetDriverVersion", "nvmlGpmQueryDeviceSupport", "nvmlDeviceGetHandleByIndex"]
FAST_CALLS = ["nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTemperature",
              "nvmlDeviceGetPowerUsage", "nvmlDeviceGetPerformanceState",
              "nvmlDeviceGetCurrentClocksEventReasons"]
# the process lists and per-process utilisation: their own cadences (processes.py, test_processes.py); the
# rare getters: RARE_EVERY_S and a change of performance state (below)


@pytest.mark.parametrize("call", IDENTITY_CALLS)
def test_identity_is_read_once_not_per_tick(call: str) -> None:
    fake = make_fake_nvml(gpus=2)
    source, clock = open_source(fake)
    before = fake.calls[call]
    for _ in range(5):
        source.poll(clock.advance(1), ())
    assert before > 0 and fake.calls[call] == before


@pytest.mark.parametrize("call", FAST_CALLS)
def test_cheap_getters_run_once_per_gpu_per_tick(call: str) -> None:
    fake = make_fake_nvml(gpus=2)
    source, clock = open_source(fake)
    for _ in range(3):
        source.poll(clock.advance(1), ())
    assert fake.calls[call] == 2 * 3


RARE_CALLS = {"nvmlDeviceGetEnforcedPowerLimit": ("power_limit_mw", 450_000, "power_limit_w", 450.0),
              "nvmlDeviceGetCurrPcieLinkGeneration": ("pcie_gen", 3, "pcie_link_gen", 3),
              "nvmlDeviceGetCurrPcieLinkWidth": ("pcie_width", 8, "pcie_link_width", 8)}


@pytest.mark.parametrize("call", RARE_CALLS)
def test_a_rare_getter_is_read_once_per_rare_period_and_its_value_is_on_every_tick_between(call: str) -> None:
    fake = make_fake_nvml(gpus=2)
    source, clock = open_source(fake)
    _, _, field, _ = RARE_CALLS[call]
    ticks = 2 * int(RARE_EVERY_S) + 1  # 1 s apart: reads at the first tick and every RARE_EVERY_S after
    values = [getattr(source.poll(clock.advance(1), ()).gpus[1], field) for _ in range(ticks)]
    assert fake.calls[call] == 2 * 3
    assert None not in values and len(set(values)) == 1


@pytest.mark.parametrize("call", RARE_CALLS)
def test_a_change_of_a_rare_value_shows_within_the_rare_period(call: str) -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    setting, new, field, expected = RARE_CALLS[call]
    source.poll(clock.advance(1), ())
    setattr(fake.gpus[0], setting, new)  # an administrator's -pl, a link retrained narrower
    shown = [getattr(source.poll(clock.advance(1), ()).gpus[0], field) for _ in range(int(RARE_EVERY_S))]
    assert shown[-1] == expected  # within RARE_EVERY_S ticks of 1 s


def test_a_link_speed_that_follows_the_performance_state_shows_on_the_tick_the_state_changes() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    source.poll(clock.advance(1), ())
    source.poll(clock.advance(1), ())
    fake.gpus[0].pstate, fake.gpus[0].pcie_gen = 8, 1  # idle: the driver drops the link to gen 1
    idle = source.poll(clock.advance(1), ()).gpus[0]
    fake.gpus[0].pstate, fake.gpus[0].pcie_gen = 0, 5
    busy = source.poll(clock.advance(1), ()).gpus[0]
    assert (idle.pstate, idle.pcie_link_gen, busy.pstate, busy.pcie_link_gen) == (8, 1, 0, 5)


def test_a_rare_getter_that_failed_once_is_asked_again_on_the_next_tick() -> None:
    fake = make_fake_nvml()
    fake.inject("nvmlDeviceGetCurrPcieLinkWidth", pynvml.NVML_ERROR_UNKNOWN, times=1)
    source, clock = open_source(fake)
    first = source.poll(clock.advance(1), ()).gpus[0]
    second = source.poll(clock.advance(1), ()).gpus[0]
    assert (first.pcie_link_width, second.pcie_link_width) == (None, 16)
    assert first.pcie_link_gen == second.pcie_link_gen == 5


def test_clock_info_is_called_for_sm_and_memory_each_tick() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    source.poll(clock.advance(1), ())
    source.poll(clock.advance(1), ())
    assert fake.calls["nvmlDeviceGetClockInfo"] == 2 * 2


def test_slow_getters_run_every_slow_interval_and_carry_their_value_between() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake, slow_interval=10.0)
    energies = []
    for step in range(25):  # 25 ticks of 1 s: slow reads at t=1, 11, 21
        fake.gpus[0].energy_mj = 1000 * (step + 1)
        energies.append(source.poll(clock.advance(1), ()).gpus[0].energy_j)
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 3
    assert fake.calls["nvmlDeviceGetTotalEccErrors"] == 3 * 2  # corrected and uncorrected
    assert energies[:3] == [1.0, 1.0, 1.0] and energies[10] == 11.0 and energies[24] == 21.0


def test_slow_interval_zero_turns_the_slow_getters_off_but_mig_mode_is_still_read_once() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake, slow_interval=0, pcie_throughput=True)
    for _ in range(3):
        gpu = source.poll(clock.advance(1), ()).gpus[0]
    assert (gpu.energy_j, gpu.ecc_corrected, gpu.pcie_tx_bytes_s) == (None, None, None)
    assert fake.calls["nvmlDeviceGetTotalEnergyConsumption"] == 0
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0
    assert gpu.mig_mode is False and fake.calls["nvmlDeviceGetMigMode"] == 1


def test_nvml_pcie_throughput_is_off_by_default_because_it_costs_21_ms() -> None:
    fake = make_fake_nvml()
    gpu = first_gpu(fake)
    assert (gpu.pcie_tx_bytes_s, gpu.pcie_rx_bytes_s) == (None, None)
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_pcie_throughput_follows_the_slow_cadence_when_on() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake, slow_interval=5.0, pcie_throughput=True)
    for _ in range(10):
        source.poll(clock.advance(1), ())
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 2 * 2  # t=1 and t=6, TX and RX


def test_the_source_declares_its_name_role_and_deadline() -> None:
    source, _ = open_source(make_fake_nvml(), deadline_s=0.5)
    assert (source.name, source.role, source.deadline_s) == ("nvml", "gpu", 0.5)


def test_memory_is_still_read_when_another_tool_replaced_the_getter_with_a_one_argument_wrapper() -> None:
    fake = make_fake_nvml()
    original = fake.nvmlDeviceGetMemoryInfo

    @functools.wraps(original)  # nvitop installs such a wrapper in pynvml's place
    def wrapped(handle):  # type: ignore[no-untyped-def]
        return original(handle)

    fake.nvmlDeviceGetMemoryInfo = wrapped  # type: ignore[method-assign]
    gpu = first_gpu(fake)
    assert gpu.mem_used_bytes is not None and gpu.mem_total_bytes is not None
