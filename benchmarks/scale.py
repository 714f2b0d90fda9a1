"""Exporter scale: /metrics with 8 GPUs x 256 processes (2048 processes), from the fake NVML.

Two measurements: the daemon end to end (a real HTTP scrape of ``gpuwatch daemon --replay``, as
Prometheus would make it, new connection each time), and the exposition alone in-process (collector +
text rendering) with the daemon's default cap on process series and with every process exported.
"""

from __future__ import annotations

import functools
import gzip
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks import commands
from benchmarks.procs import Started, free_port, start, wait_http
from benchmarks.stats import summarize, time_calls
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model.recording import load
from gpuwatch.model.snapshot import Snapshot


def in_process(recording: Path, n: int = 30) -> dict[str, Any]:
    snap = load(recording)[-1]
    out: dict[str, Any] = {"processes": len(snap.processes), "gpus": len(snap.gpus)}
    for label, cap in (("default_cap", None), ("all_processes", len(snap.processes))):
        def latest(snap: Snapshot = snap) -> Snapshot:
            return snap

        collector = (SnapshotCollector(latest) if cap is None
                     else SnapshotCollector(latest, max_process_series=cap))
        registry = Exporter(collector).registry
        body = render(registry)
        t = time_calls(functools.partial(render, registry), n, warmup=2)
        out[label] = {**t.to_dict(), "bytes": len(body), "gzip_bytes": len(gzip.compress(body)),
                      "series": sum(1 for line in body.splitlines() if line and not line.startswith(b"#")),
                      "max_process_series": collector.max_process_series}
    return out


def _scrape(url: str) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read()
    return time.perf_counter() - t0, body


def via_daemon(recording: Path, logdir: Path, n: int = 40) -> dict[str, Any]:
    """Scrapes of a daemon replaying ``recording`` at recorded pace (one snapshot a second)."""
    port = free_port()
    cmd = commands.daemon(port, "--replay", str(recording), "--speed", "1", "--loop")
    proc: Started = start("daemon-scale", cmd, logdir, env=commands.isolated_env("daemon-scale", logdir))
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while b"gpuwatch_up 1" not in wait_http(url, 60, proc):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} never reported gpuwatch_up 1")
            time.sleep(0.2)
        for _ in range(3):
            _scrape(url)
        samples, sizes = [], []
        for _ in range(n):
            dt, body = _scrape(url)
            samples.append(dt)
            sizes.append(len(body))
            time.sleep(0.05)
        t = summarize(samples)
        return {**t.to_dict(), "bytes": max(sizes), "gzip_bytes": len(gzip.compress(body)),
                "series": sum(1 for line in body.splitlines() if line and not line.startswith(b"#")),
                "command": " ".join(cmd[2:])}
    finally:
        proc.stop()


def bench_scale(recording: Path, logdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"scale_nvml": "fake NVML (tests/fakes/fake_pynvml.py), 8 GPUs x 256 processes"}
    inproc = in_process(recording)
    out["scale_in_process"] = inproc
    try:
        daemon = via_daemon(recording, logdir)
    except (RuntimeError, TimeoutError, OSError) as exc:
        out["scale_daemon"] = {"error": str(exc)[:1500]}
        out["scrape_ms_8x256"] = round(inproc["default_cap"]["median_ms"], 3)
        out["scrape_p90_ms_8x256"] = round(inproc["default_cap"]["p90_ms"], 3)
        out["scrape_bytes_8x256"] = inproc["default_cap"]["bytes"]
        out["scrape_how"] = "in-process rendering (the daemon did not come up)"
        return out
    out["scale_daemon"] = daemon
    out["scrape_ms_8x256"] = round(daemon["median_ms"], 3)
    out["scrape_p90_ms_8x256"] = round(daemon["p90_ms"], 3)
    out["scrape_bytes_8x256"] = daemon["bytes"]
    out["scrape_how"] = "HTTP GET /metrics of gpuwatch daemon --replay (new connection per scrape)"
    return out
