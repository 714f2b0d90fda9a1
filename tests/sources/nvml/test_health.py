"""The NVML health fields: each read into GpuHealth in the model's units, each absent alone when NVML says
NotSupported / NoPermission or the binding lacks the function (logged once, not asked again), read on the
health worker's cadence and never on the tick."""

from __future__ import annotations

import logging
import time
from typing import Any

import pynvml
import pytest
from fakes.fake_pynvml import FakeClock, FakeNvml, make_fake_nvml

from gpuwatch.model.health import GpuHealth
from gpuwatch.sources.nvml import NvmlSource
from gpuwatch.sources.nvml.health_worker import HealthWorker

HEALTH_CALLS = ("nvmlDeviceGetRemappedRows", "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetFanSpeed",
                "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization", "nvmlDeviceGetNvLinkState",
                "nvmlDeviceGetFieldValues")


def health_of(fake: FakeNvml, gpu: int = 0) -> GpuHealth:
    """The health on the first reading of a source over ``fake`` (read once at start, before any tick)."""
    source = NvmlSource(nvml=fake, clock=FakeClock())
    try:
        health = source.poll(1000.2, ()).gpus[gpu].health
    finally:
        source.close()
    assert health is not None
    return health


def worker(fake: FakeNvml, clock: FakeClock, **kwargs: Any) -> tuple[NvmlSource, HealthWorker]:
    """A source without its own worker, and a worker over its GPUs driven by hand (``step``) on ``clock``."""
    source = NvmlSource(nvml=fake, clock=clock, health_interval=0)
    w = HealthWorker(fake, [g.device for g in source.gpus], clock=clock, **kwargs)
    w.open_events()
    return source, w


# field, fake GPU settings, expected value in model units
FIELDS = [
    ("remapped_rows_correctable", {"remapped_rows": (3, 1, 1, 0)}, 3),
    ("remapped_rows_uncorrectable", {"remapped_rows": (3, 1, 1, 0)}, 1),
    ("row_remap_pending", {"remapped_rows": (3, 1, 1, 0)}, True),
    ("row_remap_failure", {"remapped_rows": (0, 0, 0, 1)}, True),
    ("pcie_replays", {"pcie_replays": 17}, 17),
    ("memory_temperature_c", {"memory_temp": 61}, 61.0),
    ("fan_speed_percent", {"fan_speed": 44}, 44.0),
    ("encoder_util", {"encoder_util": 12}, 12.0),
    ("decoder_util", {"decoder_util": 35}, 35.0),
    ("nvlink_links", {"nvlink_active": [True] * 12 + [False] * 6}, 12 + 6),
    ("nvlink_links_up", {"nvlink_active": [True] * 12 + [False] * 6}, 12),
    ("nvlink_tx_bytes", {"nvlink_active": [True, False, True], "nvlink_tx_kib": [5, 1000, 7]}, (5 + 7) * 1024),
    ("nvlink_rx_bytes", {"nvlink_active": [True, True], "nvlink_rx_kib": [1, 2]}, 3 * 1024),
    ("xid_count", {}, 0),
    ("xid_recent", {}, 0),
]

#: field -> how NVML refuses it on a GPU that lacks it
REFUSALS: dict[str, tuple[str, list[str]]] = {
    "nvmlDeviceGetRemappedRows": ("remapped_rows", ["remapped_rows_correctable", "remapped_rows_uncorrectable",
                                                    "row_remap_pending", "row_remap_failure"]),
    "nvmlDeviceGetPcieReplayCounter": ("pcie_replays", ["pcie_replays"]),
    "nvmlDeviceGetFanSpeed": ("fan_speed", ["fan_speed_percent"]),
    "nvmlDeviceGetEncoderUtilization": ("encoder_util", ["encoder_util"]),
    "nvmlDeviceGetDecoderUtilization": ("decoder_util", ["decoder_util"]),
    "nvmlDeviceGetNvLinkState": ("nvlink", ["nvlink_links", "nvlink_links_up", "nvlink_tx_bytes",
                                            "nvlink_rx_bytes"]),
    "nvmlDeviceGetFieldValues": ("memory_temperature", ["memory_temperature_c", "nvlink_tx_bytes",
                                                        "nvlink_rx_bytes"]),
}


@pytest.mark.parametrize(("name", "settings", "expected"), FIELDS, ids=[f[0] for f in FIELDS])
def test_each_health_field_is_read_in_model_units(name: str, settings: dict[str, Any], expected: Any) -> None:
    fake = make_fake_nvml()
    for key, value in settings.items():
        setattr(fake.gpus[0], key, value)
    value = getattr(health_of(fake), name)
    assert value == expected and type(value) is type(expected)


def test_a_gpu_that_reports_everything_fills_every_health_field_but_the_xid_it_never_had() -> None:
    health = health_of(make_fake_nvml())
    empty = [f for f in GpuHealth.__dataclass_fields__ if getattr(health, f) is None]
    assert empty == ["xid_last", "xid_last_time"]
    assert health.problems(time.time()) == []


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_NO_PERMISSION,
                                  pynvml.NVML_ERROR_FUNCTION_NOT_FOUND], ids=["NotSupported", "NoPermission",
                                                                             "FunctionNotFound"])
@pytest.mark.parametrize("call", sorted(REFUSALS))
def test_a_refused_call_leaves_only_its_fields_out_logs_once_and_is_not_asked_again(
        call: str, code: int, caplog: pytest.LogCaptureFixture) -> None:
    fake = make_fake_nvml()
    fake.inject(call, code, gpu=0)
    clock = FakeClock()
    source, w = worker(fake, clock, interval=10.0)
    key, gone = REFUSALS[call]
    with caplog.at_level(logging.INFO, logger="gpuwatch.sources.nvml"):
        for _ in range(4):
            w.step()
            clock.advance(10.0)
    source.close()
    health = w.latest[0]
    assert [f for f in GpuHealth.__dataclass_fields__ if getattr(health, f) is None] == sorted(
        {*gone, "xid_last", "xid_last_time"}, key=list(GpuHealth.__dataclass_fields__).index)
    said = [r for r in caplog.records if r.levelno == logging.INFO and key.replace("_", " ") in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    assert fake.calls[call] == 1  # NotSupported once: never asked again


@pytest.mark.parametrize("call", sorted(REFUSALS))
def test_an_older_binding_without_the_function_leaves_only_its_fields_out(call: str) -> None:
    fake = make_fake_nvml()
    fake.hide(call)
    health = health_of(fake)
    gone = {*REFUSALS[call][1], "xid_last", "xid_last_time"}
    assert {f for f in GpuHealth.__dataclass_fields__ if getattr(health, f) is None} == gone
    assert fake.calls[call] == 0


@pytest.mark.parametrize(("field", "name"), [(pynvml.NVML_FI_DEV_MEMORY_TEMP, "memory_temperature_c"),
                                             (pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, "nvlink_tx_bytes")])
def test_a_field_value_nvml_does_not_support_is_left_out_alone(field: int, name: str) -> None:
    fake = make_fake_nvml()
    fake.gpus[0].field_errors[field] = pynvml.NVML_ERROR_NOT_SUPPORTED
    health = health_of(fake)
    assert getattr(health, name) is None
    others = {"memory_temperature_c", "nvlink_tx_bytes"} - {name}
    assert all(getattr(health, o) is not None for o in others)


def test_a_gpu_without_nvlink_has_no_nvlink_fields_and_its_neighbour_keeps_them() -> None:
    fake = make_fake_nvml(gpus=2)
    fake.gpus[1].nvlink_active = []
    source = NvmlSource(nvml=fake, clock=FakeClock())
    gpus = source.poll(1000.2, ()).gpus
    source.close()
    assert gpus[1].health is not None and gpus[1].health.nvlink_links is None
    assert gpus[1].health.nvlink_tx_bytes is None and gpus[1].health.memory_temperature_c == 45.0
    assert gpus[0].health is not None and gpus[0].health.nvlink_links_up == 18


def test_health_is_read_every_interval_off_the_tick() -> None:
    fake = make_fake_nvml()
    clock = FakeClock()
    source, w = worker(fake, clock, interval=10.0, wait_s=0.0)
    w.step()  # reads at once
    reads = fake.calls["nvmlDeviceGetRemappedRows"]
    for _ in range(9):
        clock.advance(1.0)
        source.poll(clock(), ())  # ticks call no health getter
        w.step()
    assert fake.calls["nvmlDeviceGetRemappedRows"] == reads == 1
    fake.gpus[0].pcie_replays = 5
    clock.advance(1.0)
    w.step()
    source.close()
    assert fake.calls["nvmlDeviceGetRemappedRows"] == 2 and w.latest[0].pcie_replays == 5


def test_a_tick_makes_no_health_call_even_with_the_worker_running() -> None:
    fake = make_fake_nvml()
    source = NvmlSource(nvml=fake, clock=FakeClock(), health_interval=3600.0)
    before = {c: fake.calls[c] for c in HEALTH_CALLS}
    for t in range(20):
        source.poll(1000.0 + t, ())
    after = {c: fake.calls[c] for c in HEALTH_CALLS}
    source.close()
    assert after == before


def test_health_off_starts_no_worker_and_reads_nothing() -> None:
    fake = make_fake_nvml()
    source = NvmlSource(nvml=fake, clock=FakeClock(), health_interval=0)
    gpu = source.poll(1000.2, ()).gpus[0]
    source.close()
    assert source.health is None and gpu.health is None
    assert all(fake.calls[c] == 0 for c in (*HEALTH_CALLS, "nvmlEventSetCreate"))


def test_a_link_that_does_not_answer_gives_no_half_true_count_and_a_failed_probe_is_tried_again() -> None:
    fake = make_fake_nvml()
    fake.inject("nvmlDeviceGetNvLinkState", pynvml.NVML_ERROR_UNKNOWN, times=1)  # link 0 at the first probe
    clock = FakeClock()
    source, w = worker(fake, clock, interval=10.0, wait_s=0.0)
    w.step()
    assert w.latest[0].nvlink_links is None
    clock.advance(10.0)
    w.step()  # probed again: 18 links
    assert (w.latest[0].nvlink_links, w.latest[0].nvlink_links_up) == (18, 18)
    fake.inject("nvmlDeviceGetNvLinkState", pynvml.NVML_ERROR_UNKNOWN, times=1)
    clock.advance(10.0)
    w.step()
    source.close()
    assert w.latest[0].nvlink_links_up is None and w.latest[0].problems(time.time()) == []
