"""The same GPUs read through dcgm-exporter <= 4.8 and 4.9/4.10 names give the same Snapshot values.

``dcgm-exporter-4.10-h200-k8s.prom`` is ``dcgm-exporter-sample-h200-k8s.prom`` rewritten with 4.9's renamed
fields and units and 4.10's PCIe names (its header says how); only the driver label, which 4.9 adds to
every series, tells them apart.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuwatch.model.snapshot import GpuSample
from gpuwatch.sources.dcgm.convert import to_gpu_samples
from gpuwatch.sources.dcgm.parse import parse_body
from sources.dcgm.exporter import fixture


def gpus(name: str) -> tuple[GpuSample, ...]:
    return to_gpu_samples(parse_body(fixture(name).decode()))


OLD, NEW = gpus("dcgm-exporter-sample-h200-k8s.prom"), gpus("dcgm-exporter-4.10-h200-k8s.prom")
SCALARS = [f.name for f in dataclasses.fields(GpuSample)
           if f.name not in ("profiling", "extra", "labels", "driver_version")]


@pytest.mark.parametrize("index", [0, 1])
@pytest.mark.parametrize("attr", SCALARS)
def test_every_slot_has_the_same_value_from_either_generation(index: int, attr: str) -> None:
    old, new = getattr(OLD[index], attr), getattr(NEW[index], attr)
    assert new == (pytest.approx(old) if isinstance(old, float) else old)
    assert type(new) is type(old)


@pytest.mark.parametrize("index", [0, 1])
def test_profiling_extra_and_labels_are_the_same_from_either_generation(index: int) -> None:
    old, new = OLD[index], NEW[index]
    assert dataclasses.asdict(new.profiling["dcgm"]) == pytest.approx(dataclasses.asdict(old.profiling["dcgm"]))
    assert new.extra == pytest.approx(old.extra)
    assert new.labels == old.labels


def test_the_newer_generation_also_names_the_driver() -> None:
    assert [g.driver_version for g in OLD] == [None, None]
    assert [g.driver_version for g in NEW] == ["580.95.05", "580.95.05"]


def test_the_readings_are_real_numbers_not_zeros() -> None:
    busy = NEW[0]
    assert (busy.sm_clock_mhz, busy.power_w, busy.gpu_util, busy.temperature_c) == (1980.0, 612.877, 97.0, 64.0)
    assert busy.sm_active == pytest.approx(87.193)
    assert busy.extra["DCGM_FI_DEV_XID_ERRORS"] == 0.0 and NEW[1].extra["DCGM_FI_DEV_XID_ERRORS"] == 31.0
