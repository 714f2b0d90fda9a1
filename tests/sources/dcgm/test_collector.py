"""DCGM through the sampler: alone (no NVML), next to NVML+GPM (merged by UUID), failing and recovering."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fakes.fake_pynvml import make_fake_nvml

from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sources.dcgm import DcgmSource
from gpuwatch.sources.nvml import NvmlSource
from sources.dcgm.conftest import ManualClock
from sources.dcgm.exporter import FakeExporter, fixture

H100 = fixture("dcgm-exporter-sample.prom")
UUIDS = ["GPU-5a3c1f2e-8d47-4b9e-a1c3-7f20e6d94b18", "GPU-c0e9b6a4-21f3-4d8a-9e57-3b6d0a8f1c22"]


@pytest.fixture
def dcgm(exporter: FakeExporter, clock: ManualClock) -> Iterator[DcgmSource]:
    exporter.serve(H100)
    source = DcgmSource(exporter.url, connect_timeout=0.5, read_timeout=0.4, total_timeout=0.8, jitter=0.0,
                        clock=clock)
    yield source
    source.close()


def state(snap: Snapshot, name: str) -> tuple[str, str | None]:
    status = snap.source(name)
    assert status is not None
    return status.state, status.message


def test_without_nvml_the_gpus_come_from_dcgm_alone(dcgm: DcgmSource) -> None:
    collector = LiveCollector([dcgm], hostname="laptop")
    snap = collector.collect()
    collector.close()
    assert [g.uuid for g in snap.gpus] == UUIDS
    assert [(g.power_w, g.sm_clock_mhz) for g in snap.gpus] == [(687.412, 1980.0), (71.205, 345.0)]
    assert snap.gpus[0].prof_source("sm_active") == "dcgm"
    assert state(snap, "dcgm") == ("ok", None)


def test_a_dead_exporter_marks_the_source_error_keeps_gpu_identity_and_recovers(
        dcgm: DcgmSource, exporter: FakeExporter, clock: ManualClock) -> None:
    collector = LiveCollector([dcgm], hostname="laptop")
    assert collector.collect().gpus[0].power_w == 687.412
    exporter.stop()
    down = collector.collect()
    assert state(down, "dcgm")[0] == "error"
    assert "cannot reach 127.0.0.1" in (state(down, "dcgm")[1] or "")
    assert [g.uuid for g in down.gpus] == UUIDS and down.gpus[0].power_w is None  # identity, no stale values
    held = collector.collect()  # inside the back-off window: no request, same reason
    assert "next try in" in (state(held, "dcgm")[1] or "")
    exporter.start()
    clock.advance(1.5)
    back = collector.collect()
    collector.close()
    assert state(back, "dcgm") == ("ok", None)
    assert back.gpus[0].power_w == 687.412


def test_with_nvml_and_dcgm_both_profiling_backends_are_kept_on_the_same_gpu(dcgm: DcgmSource) -> None:
    fake = make_fake_nvml(gpus=2, processes_per_gpu=1)
    for gpu, uuid in zip(fake.gpus, UUIDS, strict=True):
        gpu.uuid = uuid
    nvml = NvmlSource(nvml=fake, slow_interval=0)
    collector = LiveCollector([nvml, dcgm], hostname="gpu-node-07")
    collector.collect()
    time.sleep(0.15)  # GPM needs two samples more than 100 ms apart
    snap = collector.collect()
    collector.close()
    assert [g.uuid for g in snap.gpus] == UUIDS
    gpu = snap.gpus[0]
    assert set(gpu.profiling) == {"gpm", "dcgm"}
    assert gpu.profiling["dcgm"].sm_active == pytest.approx(91.2457)
    assert gpu.profiling["gpm"].sm_active is not None
    assert gpu.prof_source("sm_active") == "gpm"  # GPM first, DCGM kept beside it
    assert gpu.temperature_c == fake.gpus[0].temperature  # NVML's reading wins where both have one
    assert gpu.extra["DCGM_FI_DEV_XID_ERRORS"] == 0.0 and gpu.labels == {"hostname": "gpu-node-07"}
    assert [state(snap, n)[0] for n in ("nvml", "dcgm")] == ["ok", "ok"]


def test_a_failing_dcgm_leaves_nvml_gpus_and_values_untouched(dcgm: DcgmSource, exporter: FakeExporter) -> None:
    fake = make_fake_nvml(gpus=2, processes_per_gpu=0)
    for gpu, uuid in zip(fake.gpus, UUIDS, strict=True):
        gpu.uuid = uuid
    exporter.behave(mode="body", status=500, body=b"")
    collector = LiveCollector([NvmlSource(nvml=fake, slow_interval=0), dcgm], hostname="gpu-node-07")
    snap = collector.collect()
    collector.close()
    assert [state(snap, n)[0] for n in ("nvml", "dcgm")] == ["ok", "error"]
    assert [g.temperature_c for g in snap.gpus] == [float(g.temperature) for g in fake.gpus]
    assert all("dcgm" not in g.profiling for g in snap.gpus)
