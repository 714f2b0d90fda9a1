"""GPM: a rolling sample pair per GPU, metrics against the previous sample, no sleeping in a tick."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest
from fakes.fake_pynvml import FakeClock, FakeNvml, make_fake_nvml

from gpuwatch.model.snapshot import Profiling
from gpuwatch.sources.nvml import NvmlSource
from gpuwatch.sources.nvml.gpm import SLOW_EVERY_S


def open_source(fake: FakeNvml, **kwargs: Any) -> tuple[NvmlSource, FakeClock]:
    clock = FakeClock()
    return NvmlSource(nvml=fake, clock=clock, **kwargs), clock


def gpm(source: NvmlSource, now: float, gpu: int = 0) -> Profiling | None:
    return source.poll(now, ()).gpus[gpu].profiling.get("gpm")


# Profiling field, GPM metric, value NVML gives, value in the model
METRICS = [
    ("sm_active", pynvml.NVML_GPM_METRIC_SM_UTIL, 95.5, 95.5),
    ("sm_occupancy", pynvml.NVML_GPM_METRIC_SM_OCCUPANCY, 18.5, 18.5),
    ("tensor_active", pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL, 27.1, 27.1),
    ("dram_active", pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL, 15.8, 15.8),
    ("graphics_active", pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL, 99.4, 99.4),
    ("fp64_active", pynvml.NVML_GPM_METRIC_FP64_UTIL, 1.25, 1.25),
    ("fp32_active", pynvml.NVML_GPM_METRIC_FP32_UTIL, 66.9, 66.9),
    ("fp16_active", pynvml.NVML_GPM_METRIC_FP16_UTIL, 12.0, 12.0),
    ("pcie_tx_bytes_s", pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC, 5.0, 5.0 * 2**20),
    ("pcie_rx_bytes_s", pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC, 18.5, 18.5 * 2**20),
]


@pytest.mark.parametrize(("field", "metric", "raw", "expected"), METRICS, ids=[m[0] for m in METRICS])
def test_each_gpm_metric_lands_in_its_profiling_field_in_model_units(field: str, metric: int, raw: float,
                                                                     expected: float) -> None:
    fake = make_fake_nvml()
    fake.gpus[0].gpm[metric] = raw
    source, clock = open_source(fake)
    assert getattr(gpm(source, clock.advance(0.5)), field) == expected


def test_the_first_tick_within_100_ms_of_start_has_no_gpm_yet() -> None:
    source, clock = open_source(make_fake_nvml())
    assert gpm(source, clock.advance(0.05)) is None
    assert gpm(source, clock.advance(0.2)) is not None


def test_each_tick_computes_against_the_previous_sample() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    seen = []
    for occupancy in (10.0, 20.0, 30.0, 40.0):
        fake.gpus[0].gpm[pynvml.NVML_GPM_METRIC_SM_OCCUPANCY] = occupancy
        p = gpm(source, clock.advance(0.2))
        seen.append(None if p is None else p.sm_occupancy)
    # The fake answers INVALID_ARGUMENT (-> None) to a pair given newest-first or twice the same sample.
    assert seen == [10.0, 20.0, 30.0, 40.0]
    assert fake.calls["nvmlGpmSampleGet"] == 1 + 4
    assert fake.calls["nvmlGpmSampleAlloc"] == 3  # newest, anchor, and the one being taken


def test_graphics_activity_is_computed_once_per_slow_span_as_the_mean_over_it() -> None:
    fake = make_fake_nvml()
    graphics, sm = pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL, pynvml.NVML_GPM_METRIC_SM_UTIL
    fake.gpus[0].gpm[graphics] = 50.0
    source, clock = open_source(fake)
    first = gpm(source, clock.advance(0.5))
    assert first is not None and first.graphics_active == 50.0  # at once, from the start sample
    fake.gpus[0].gpm[graphics] = 90.0
    calls = fake.calls["nvmlGpmMetricsGet"]
    seen = []
    for second in range(1, int(SLOW_EVERY_S)):
        fake.gpus[0].gpm[sm] = float(second)
        p = gpm(source, clock.advance(1.0))
        assert p is not None
        seen.append((p.sm_active, p.graphics_active))
    # every tick's SM activity is its own; graphics holds its last value, at one metrics call a tick
    assert seen == [(float(s), 50.0) for s in range(1, int(SLOW_EVERY_S))]
    assert fake.calls["nvmlGpmMetricsGet"] - calls == int(SLOW_EVERY_S) - 1
    later = gpm(source, clock.advance(1.0))
    assert later is not None and later.graphics_active == 90.0  # the mean of the samples since the last one
    assert fake.calls["nvmlGpmMetricsGet"] - calls == int(SLOW_EVERY_S) + 1


def test_a_tick_sooner_than_100_ms_reuses_the_last_metrics_without_sampling() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    first = gpm(source, clock.advance(0.2))
    fake.gpus[0].gpm[pynvml.NVML_GPM_METRIC_SM_UTIL] = 1.0
    samples = fake.calls["nvmlGpmSampleGet"]
    again = gpm(source, clock.advance(0.05))
    assert again is first and fake.calls["nvmlGpmSampleGet"] == samples
    later = gpm(source, clock.advance(0.06))  # 110 ms after the last sample
    assert later is not None and later.sm_active == 1.0


def test_a_metric_nvml_does_not_return_reads_none_and_the_others_are_kept() -> None:
    fake = make_fake_nvml()
    fake.gpus[0].gpm_errors[pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL] = pynvml.NVML_ERROR_NOT_SUPPORTED
    source, clock = open_source(fake)
    p = gpm(source, clock.advance(0.5))
    assert p is not None and p.tensor_active is None and p.sm_occupancy == 51.6


GPM_UNAVAILABLE = [
    ("the device does not support GPM", {"gpm": False}, None),
    ("the driver predates GPM", {"missing": {"nvmlGpmQueryDeviceSupport"}}, None),
    ("the support query is refused", {}, ("nvmlGpmQueryDeviceSupport", pynvml.NVML_ERROR_NO_PERMISSION)),
    ("samples cannot be allocated", {}, ("nvmlGpmSampleAlloc", pynvml.NVML_ERROR_MEMORY)),
]


@pytest.mark.parametrize(("case", "options", "inject"), GPM_UNAVAILABLE, ids=[c[0] for c in GPM_UNAVAILABLE])
def test_no_gpm_means_no_gpm_profiling_and_no_samples_held(case: str, options: dict[str, Any],
                                                          inject: tuple[str, int] | None) -> None:
    fake = make_fake_nvml(**options)
    if inject:
        fake.inject(*inject)
    source, clock = open_source(fake)
    gpu = source.poll(clock.advance(0.5), ()).gpus[0]
    assert gpu.profiling == {} and gpu.sm_occupancy is None
    assert fake.gpm_live == {} and fake.calls["nvmlGpmSampleGet"] == 0
    assert gpu.gpu_util == 97.0  # the rest of the GPU is sampled as usual


def test_a_sample_that_cannot_be_allocated_frees_those_allocated_before_it() -> None:
    fake = make_fake_nvml()
    real, made = fake.nvmlGpmSampleAlloc, []

    def third_fails() -> Any:
        if len(made) == 2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_MEMORY)
        made.append(real())
        return made[-1]

    fake.nvmlGpmSampleAlloc = third_fails  # type: ignore[method-assign]
    source, clock = open_source(fake)
    assert source.poll(clock.advance(0.5), ()).gpus[0].profiling == {}
    assert len(made) == 2 and fake.gpm_live == {}


def test_gpm_that_stops_being_supported_frees_its_samples_and_stays_off() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    assert gpm(source, clock.advance(0.5)) is not None
    fake.gpus[0].gpm_supported = False  # e.g. MIG switched on
    assert gpm(source, clock.advance(0.5)) is None
    assert fake.gpm_live == {}
    calls = fake.calls["nvmlGpmSampleGet"]
    assert gpm(source, clock.advance(0.5)) is None and fake.calls["nvmlGpmSampleGet"] == calls


def test_a_failed_sample_gives_no_metrics_that_tick_and_the_pair_resumes_next_tick() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    fake.inject("nvmlGpmSampleGet", pynvml.NVML_ERROR_UNKNOWN, times=1)
    assert gpm(source, clock.advance(0.5)) is None
    assert gpm(source, clock.advance(0.5)) is not None


def test_a_failed_metrics_call_gives_no_metrics_that_tick_only() -> None:
    fake = make_fake_nvml()
    source, clock = open_source(fake)
    fake.inject("nvmlGpmMetricsGet", pynvml.NVML_ERROR_UNKNOWN, times=1)
    assert gpm(source, clock.advance(0.5)) is None
    assert gpm(source, clock.advance(0.5)) is not None


def test_close_frees_every_gpm_sample() -> None:
    fake = make_fake_nvml(gpus=4)
    source, clock = open_source(fake)
    source.poll(clock.advance(0.5), ())
    assert len(fake.gpm_live) == 3 * 4
    source.close()
    assert fake.gpm_live == {} and fake.calls["nvmlGpmSampleFree"] == 12


def test_each_gpu_keeps_its_own_samples() -> None:
    fake = make_fake_nvml(gpus=2)
    fake.gpus[1].gpm[pynvml.NVML_GPM_METRIC_SM_UTIL] = 5.0
    source, clock = open_source(fake)
    gpus = source.poll(clock.advance(0.5), ()).gpus
    assert [g.sm_active for g in gpus] == [87.5, 5.0]
