"""The NVML health fields on a real NVIDIA GPU (run on the GPU machine: ``pytest -m gpu tests/gpu -s``).

Prints, per GPU, what the driver answers for every health call (the value, or the NVML error such as
NotSupported) beside what gpuwatch put in the Snapshot, and times the XID worker: a wait that times out,
a start, a stop. Where ``$OUT`` is set both go to ``$OUT/nvml-health.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from gpuwatch.model.health import GpuHealth
from gpuwatch.sources.nvml import NvmlSource
from gpuwatch.sources.nvml.health_worker import HealthWorker

pytestmark = pytest.mark.gpu

#: GpuHealth fields -> the direct NVML call that answers them (name, extra arguments).
CALLS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "remapped_rows_correctable": ("nvmlDeviceGetRemappedRows", ()),
    "pcie_replays": ("nvmlDeviceGetPcieReplayCounter", ()),
    "fan_speed_percent": ("nvmlDeviceGetFanSpeed", ()),
    "encoder_util": ("nvmlDeviceGetEncoderUtilization", ()),
    "decoder_util": ("nvmlDeviceGetDecoderUtilization", ()),
    "nvlink_links": ("nvmlDeviceGetNvLinkState", (0,)),
}


def _write(name: str, doc: dict[str, Any]) -> None:
    print(json.dumps(doc, indent=1, default=str))
    if os.environ.get("OUT"):
        path = Path(os.environ["OUT"], "nvml-health.json")
        old = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**old, name: doc}, indent=1, default=str))


def _direct(nvml: Any, fn: str, handle: Any, *args: Any) -> Any:
    """What the driver answers, or the error's class name ("NVMLError_NotSupported")."""
    f = getattr(nvml, fn, None)
    if f is None:
        return "absent from this nvidia-ml-py"
    try:
        return f(handle, *args)
    except nvml.NVMLError as exc:
        return type(exc).__name__


def _field_values(nvml: Any, handle: Any) -> dict[str, Any]:
    ids = {"memory_temp": nvml.NVML_FI_DEV_MEMORY_TEMP, "nvlink_link_count": nvml.NVML_FI_DEV_NVLINK_LINK_COUNT,
           "pcie_replay_counter": nvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER,
           "nvlink_tx_kib_link0": (nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0)}
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, list(ids.values()))
    except nvml.NVMLError as exc:
        return {"error": type(exc).__name__}
    from gpuwatch.sources.nvml.health import field_value

    return {name: (field_value(v) if v.nvmlReturn == nvml.NVML_SUCCESS else f"nvmlReturn {v.nvmlReturn}")
            for name, v in zip(ids, values, strict=True)}


def _shown(health: GpuHealth, name: str) -> Any:
    value = getattr(health, name)
    if value is None and name in ("xid_last", "xid_last_time") and health.xid_count is not None:
        return "none yet"
    return "not supported" if value is None else value


def test_every_health_field_as_the_gpu_reports_it_and_as_gpuwatch_has_it() -> None:
    import pynvml as nvml

    source = NvmlSource(slow_interval=1.0)
    try:
        reading = source.poll(time.monotonic(), ())
        report: dict[str, Any] = {}
        for gpu, g in zip(reading.gpus, source.gpus, strict=True):
            handle = g.device.handle
            health = gpu.health
            assert health is not None, "the first reading carries the health read at start"
            direct = {field: _direct(nvml, fn, handle, *args) for field, (fn, args) in CALLS.items()}
            direct["field_values"] = _field_values(nvml, handle)
            direct["xid_events_supported"] = _direct(nvml, "nvmlDeviceGetSupportedEventTypes", handle)
            threshold = getattr(nvml, "NVML_TEMPERATURE_THRESHOLD_MEM_MAX", None)
            if threshold is not None:
                direct["memory_max_operating_temp"] = _direct(nvml, "nvmlDeviceGetTemperatureThreshold", handle,
                                                              threshold)
            ours = {f.name: _shown(health, f.name) for f in dataclasses.fields(GpuHealth)}
            report[f"gpu{gpu.index} {gpu.name}"] = {"nvml": direct, "gpuwatch": ours}
            for field, answer in direct.items():  # a call the driver answers is a field gpuwatch fills
                if field in ours and not isinstance(answer, str):
                    assert ours[field] != "not supported", (field, answer)
    finally:
        source.close()
    _write("fields", report)


def test_the_xid_worker_waits_its_timeout_starts_and_stops_cleanly() -> None:
    source = NvmlSource(health_interval=0)
    try:
        worker = HealthWorker(source.nvml, [g.device for g in source.gpus], interval=10.0)
        worker.open_events()
        registered = sorted(worker._xids)
        timing: dict[str, Any] = {"gpus_registered_for_xid": registered, "wait_s": worker.wait_s}
        if registered:
            waits = []
            for _ in range(3):
                t0 = time.perf_counter()
                worker.wait_events(0.5)  # no XID expected: NVML answers Timeout after 0.5 s
                waits.append(time.perf_counter() - t0)
            timing["wait_0.5s_took_s"] = waits
            assert all(0.4 < w < 1.5 for w in waits), waits
            t0 = time.perf_counter()
            worker.drain_events()  # the worker's rounds ask with no timeout: NVML answers at once
            timing["drain_took_s"] = time.perf_counter() - t0
            assert timing["drain_took_s"] < 0.1 and not worker._wait_failed, timing
        worker.read_health()
        worker.start()
        time.sleep(2.5)
        alive = worker._thread is not None and worker._thread.is_alive()
        t0 = time.perf_counter()
        stopped = worker.stop()
        timing |= {"alive_after_2.5s": alive, "stop_took_s": time.perf_counter() - t0, "stopped": stopped,
                   "event_set_freed": worker._event_set is None}
        _write("xid_worker", timing)
        assert alive and stopped and timing["stop_took_s"] < worker.wait_s + 0.5
        assert worker._event_set is None
        assert worker.latest and all(h.xid_count == (0 if i in registered else None) for i, h in worker.latest.items())
    finally:
        source.close()


def test_the_tick_costs_the_same_with_the_health_worker_running() -> None:
    def median_tick(health_interval: float) -> float:
        source = NvmlSource(health_interval=health_interval)
        try:
            ticks = []
            for _ in range(40):
                time.sleep(0.05)
                t0 = time.perf_counter()
                source.poll(time.monotonic(), ())
                ticks.append(time.perf_counter() - t0)
            return statistics.median(ticks)
        finally:
            source.close()

    off, on = median_tick(0), median_tick(0.2)  # health read 5 times a second: the worst case
    _write("tick_cost", {"tick_median_us_health_off": off * 1e6, "tick_median_us_health_every_0.2s": on * 1e6})
    assert on < 2 * off + 0.001
