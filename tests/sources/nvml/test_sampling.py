"""The NVML source inside the sampler and the CLI: a hung call makes it stale, not the tick; a backend
failure makes it error; ``gpuwatch snapshot`` samples through it, or says there is no driver."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pynvml
import pytest
from fakes.fake_pynvml import make_fake_nvml

import gpuwatch.sources.nvml as nvml_package
from gpuwatch.cli.main import main
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sources.base import SourceUnavailable
from gpuwatch.sources.nvml import NvmlSource


def nvml_status(collector: LiveCollector) -> tuple[str, str | None]:
    snap = collector.collect()
    status = snap.source("nvml")
    assert status is not None
    return status.state, status.message


def wait_until_idle(collector: LiveCollector, timeout: float = 5.0) -> None:
    """Until the hung poll, released, has returned on its worker thread."""
    deadline = time.monotonic() + timeout
    pending = collector.slots[0].pending
    while pending is not None and not pending.done() and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.serial  # bounds CPU share, wall time or RSS: measured alone, after the parallel part
def test_a_hung_getter_makes_the_source_stale_without_stopping_ticks_and_it_recovers_when_released() -> None:
    fake = make_fake_nvml(gpus=2)
    collector = LiveCollector([NvmlSource(nvml=fake, deadline_s=0.3)], hostname="h")
    try:
        first = collector.collect()
        assert first.source("nvml").state == "ok" and first.gpus[0].temperature_c == 37.0  # type: ignore[union-attr]
        released = fake.hang("nvmlDeviceGetTemperature", gpu=1)
        started = time.monotonic()
        hung = collector.collect()
        again = collector.collect()  # the call is still hung: this tick does not wait on it again
        took = time.monotonic() - started
        assert [hung.source("nvml").state, again.source("nvml").state] == ["stale", "stale"]  # type: ignore[union-attr]
        assert took < 0.3 + 0.25
        assert [g.uuid for g in hung.gpus] == [g.uuid for g in first.gpus]  # identity kept, values gone
        assert hung.gpus[0].temperature_c is None
        released.set()
        wait_until_idle(collector)
        recovered = collector.collect()
        assert recovered.source("nvml").state == "ok"  # type: ignore[union-attr]
        assert [g.temperature_c for g in recovered.gpus] == [37.0, 37.0]
        assert recovered.seq == 4
    finally:
        fake.release()
        collector.close()


def test_a_backend_failure_marks_the_source_error_with_the_restart_hint_and_sampling_goes_on() -> None:
    fake = make_fake_nvml()
    collector = LiveCollector([NvmlSource(nvml=fake)], hostname="h")
    try:
        fake.inject("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, times=1)
        state, message = nvml_status(collector)
        assert state == "error" and message is not None and "restart gpuwatch" in message
        assert nvml_status(collector) == ("ok", None)
    finally:
        collector.close()


def _driver_present() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


no_driver_only = pytest.mark.skipif(_driver_present(), reason="this machine has an NVIDIA driver")


@no_driver_only
def test_without_a_driver_the_real_nvml_source_is_unavailable_with_one_sentence() -> None:
    with pytest.raises(SourceUnavailable) as info:
        NvmlSource()
    assert str(info.value) == "no NVIDIA driver found (libnvidia-ml.so.1 could not be loaded)"


@no_driver_only
def test_gpuwatch_snapshot_without_a_driver_prints_one_line_and_exits_2() -> None:
    done = subprocess.run([sys.executable, "-m", "gpuwatch", "snapshot"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert "no NVIDIA driver found" in done.stderr and "Traceback" not in done.stderr


def test_gpuwatch_snapshot_json_samples_through_the_nvml_source(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    fake = make_fake_nvml(gpus=2, processes_per_gpu=3)

    def with_fake(**kwargs: Any) -> NvmlSource:
        return NvmlSource(nvml=fake, **kwargs)

    monkeypatch.setattr(nvml_package, "NvmlSource", with_fake)
    assert main(["snapshot", "--json", "--interval", "0.2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [g["uuid"] for g in doc["gpus"]] == [g.uuid for g in fake.gpus]
    assert len(doc["processes"]) == 6
    assert doc["gpus"][0]["profiling"]["gpm"]["sm_occupancy"] == 51.6
    assert {s["name"]: s["state"] for s in doc["sources"]}["nvml"] == "ok"
    assert fake.refcount == 0 and fake.gpm_live == {}  # the snapshot command closed the source
