"""Tick cost: one gpuwatch sampler tick against the raw floor and the tools people use instead.

Candidates, called round-robin in one process so they see the same GPU load and host:
  tick            Sampler.tick() over the producer the daemon and dashboard open (NVML incl. GPM + host)
  raw_nvml        the NVML calls that tick makes, bare (see raw_floor.py)
  raw_nvml_host   those plus the host source's psutil and /proc reads, bare
  nvitop_refresh  nvitop's API refresh: Device.as_snapshot() and GpuProcess snapshots of its processes
  gpustat_query   gpustat.new_query()
  nvidia_smi      one `nvidia-smi --query-gpu=... --format=csv` process, spawn to exit
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

from benchmarks.raw_floor import TracingNvml, describe, host_floor, nvml_floor, per_call_us, typical_calls
from benchmarks.stats import interleaved, ratio
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sampler.sampler import Sampler
from gpuwatch.sources.host import HostSource
from gpuwatch.sources.host_threads import THREAD_SCAN_CPU

SMI_FIELDS = ("index,uuid,name,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,"
              "power.draw,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active")


def _nvml_source(nvml: Any) -> Any:
    from gpuwatch.sources.nvml import NvmlSource

    return NvmlSource(nvml=nvml)


def _live_sampler(nvml: Any | None, interval: float = 1.0) -> Sampler:
    """The sampler the daemon runs: built by the runtime for the real driver, by hand around a fake."""
    if nvml is None:
        from gpuwatch.runtime.build import SamplingOptions, open_sampler

        return open_sampler(SamplingOptions(interval=interval)).sampler
    return Sampler(LiveCollector([_nvml_source(nvml), HostSource()]), interval=interval)


def sampling_cpu_pct(fake_nvml: Any | None, interval: float = 0.1, seconds: float = 20.0) -> float:
    """Percent of one core this process spends sampling on its own thread at ``interval`` (every cadence
    included: per-process utilisation, slow getters, GPM's slow metric, the health worker). Nothing else
    runs in the benchmark process meanwhile, so its CPU time is the sampler's."""
    sampler = _live_sampler(fake_nvml, interval).start()
    try:
        time.sleep(3.0)  # first ticks, the GPM pair and the health worker's first read
        c0, t0 = time.process_time(), time.monotonic()
        time.sleep(seconds)
        return round(100.0 * (time.process_time() - c0) / (time.monotonic() - t0), 3)
    finally:
        sampler.stop()


def nvitop_refresh() -> Callable[[], object]:
    from nvitop import Device, GpuProcess

    devices = Device.all()
    if not devices:
        raise RuntimeError("nvitop sees no GPU")

    def refresh() -> object:
        snaps = [d.as_snapshot() for d in devices]
        for d in devices:
            GpuProcess.take_snapshots(d.processes().values(), failsafe=True)
        return snaps

    return refresh


def gpustat_query() -> Callable[[], object]:
    import gpustat

    return gpustat.new_query


def nvidia_smi() -> Callable[[], object]:
    cmd = ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"]

    def spawn() -> object:
        return subprocess.run(cmd, check=True, capture_output=True).stdout

    return spawn


def _seen(snap: Any) -> dict[str, Any]:
    """What the tick actually produced: proof it did the full job, not a degraded one."""
    if snap is None:
        return {}
    gpu = snap.gpus[0] if snap.gpus else None
    return {"gpus": len(snap.gpus), "processes": len(snap.processes),
            "processes_with_host_details": sum(1 for p in snap.processes if p.cpu_percent is not None),
            "profiling_backends": sorted(gpu.profiling) if gpu is not None else [],
            "sm_active": gpu.sm_active if gpu is not None else None,
            "sources": {s.name: s.state for s in snap.sources}}


def _median_us(values: Any) -> float:
    ordered = sorted(values)
    return round(ordered[len(ordered) // 2] * 1e6, 1) if ordered else 0.0


def bench_tick(real_nvml: Any | None, fake_nvml: Any | None = None, n: int = 60,
               anchors: bool = True) -> dict[str, Any]:
    """Times the candidates. ``real_nvml``: the pynvml module (GPU machine); ``fake_nvml``: the fake (local),
    in which case the anchors that need a driver are left out and the numbers are labelled as fake."""
    nvml = real_nvml if real_nvml is not None else fake_nvml
    if nvml is None:
        raise ValueError("give the real pynvml module or a fake one")
    sampler = _live_sampler(None if real_nvml is not None else fake_nvml)
    tracer = TracingNvml(nvml)
    traced = Sampler(LiveCollector([_nvml_source(tracer), HostSource()]), interval=1.0)
    for _ in range(3):
        traced.tick()
    calls = typical_calls(tracer, traced.tick)
    snap = sampler.tick()
    pids = sorted({p.pid for p in snap.processes}) if snap is not None else []
    busy = sorted({p.pid for p in snap.processes if (p.cpu_percent or 100.0) >= THREAD_SCAN_CPU}) if snap else []
    raw = nvml_floor(calls, nvml.NVMLError)
    host = host_floor(pids, busy)

    def raw_host() -> None:
        raw()
        host()

    candidates: dict[str, tuple[Callable[[], object], int]] = {
        "tick": (sampler.tick, n), "raw_nvml": (raw, n), "raw_nvml_host": (raw_host, n)}
    anchor_errors: dict[str, str] = {}
    if anchors and real_nvml is not None:
        for name, make in (("nvitop_refresh", nvitop_refresh), ("gpustat_query", gpustat_query),
                           ("nvidia_smi", nvidia_smi)):
            try:  # an anchor that cannot run is reported, not allowed to sink the tick numbers
                fn = make()
                fn()
            except Exception as exc:
                anchor_errors[name] = f"{type(exc).__name__}: {exc}"[:500]
                continue
            candidates[name] = (fn, n)
    slot_us: dict[str, list[tuple[float, float]]] = {}
    plain_tick = sampler.tick

    def tick_and_slots() -> object:
        snap = plain_tick()
        timings_of = getattr(sampler.producer, "timings", None)
        for name, pair in (timings_of() if timings_of else {}).items():
            slot_us.setdefault(name, []).append(pair)
        return snap

    candidates["tick"] = (tick_and_slots, n)
    timings = interleaved(candidates, warmup=3, min_round_s=0.15)
    seen = _seen(sampler.latest)
    call_us = per_call_us(calls, nvml.NVMLError)
    traced.producer.close()
    sampler.producer.close()
    out: dict[str, Any] = {}
    for name, t in timings.items():
        key = {"tick": "tick_ms", "raw_nvml": "raw_nvml_ms", "raw_nvml_host": "raw_nvml_host_ms",
               "nvitop_refresh": "nvitop_refresh_ms", "gpustat_query": "gpustat_query_ms",
               "nvidia_smi": "nvidia_smi_ms"}[name]
        out[key] = round(t.median_ms, 4)
        out[key.replace("_ms", "_p90_ms")] = round(t.p90_ms, 4)
    out["tick_over_raw_nvml"] = ratio(out["tick_ms"], out["raw_nvml_ms"])
    out["tick_over_raw_nvml_host"] = ratio(out["tick_ms"], out["raw_nvml_host_ms"])
    for anchor in ("nvitop_refresh_ms", "gpustat_query_ms", "nvidia_smi_ms"):
        if anchor in out:
            out[f"{anchor[:-3]}_over_tick"] = ratio(out[anchor], out["tick_ms"])
    out["tick_details"] = {"timings": {k: t.to_dict() for k, t in timings.items()},
                           "nvml_calls_per_tick": describe(calls), "nvml_calls_total": len(calls),
                           "nvml_call_median_us": call_us, "anchor_errors": anchor_errors,
                           "source_median_us": {name: {"ran": _median_us(p[0] for p in pairs),
                                                       "waited": _median_us(p[1] for p in pairs)}
                                                for name, pairs in slot_us.items()},
                           "snapshot": seen, "nvml": "real driver" if real_nvml is not None else
                           "fake NVML (tests/fakes/fake_pynvml.py): times are Python-only"}
    return out
