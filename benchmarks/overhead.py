"""Standing costs: CPU (percent of one core) and RSS of long-running processes over one shared window.

Every job runs at the same time on the same machine (the H200 host has 16 cores, far more than the jobs
need), so one 60 s window measures all of them. HTTP endpoints are scraped every 15 s during the window,
as a Prometheus server would, so an exporter's cost includes answering its scrapes.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.procs import Meter, Started, measure_window, wait_http

SCRAPE_EVERY_S = 15.0


@dataclass
class Job:
    """One long-running process to meter. ``name`` prefixes its result keys."""

    name: str
    command: list[str]
    start: Callable[[], Started]
    ready_url: str | None = None
    scrape_url: str | None = None
    note: str = ""
    proc: Started | None = field(default=None, init=False)


def _scraper(urls: Sequence[str], stop: threading.Event, errors: list[str]) -> None:
    while not stop.wait(SCRAPE_EVERY_S):
        for url in urls:
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    resp.read()
            except OSError as exc:
                errors.append(f"{url}: {exc}")


def start_jobs(jobs: Sequence[Job]) -> None:
    for job in jobs:
        job.proc = job.start()


def wait_ready(jobs: Sequence[Job], timeout_s: float = 90.0) -> dict[str, str]:
    """Waits (``timeout_s`` in all) for each job's ready URL; returns {job: problem} for those that never
    came up."""
    problems = {}
    deadline = time.monotonic() + timeout_s
    for job in jobs:
        assert job.proc is not None
        if job.ready_url is None:
            continue
        try:
            wait_http(job.ready_url, max(1.0, deadline - time.monotonic()), job.proc)
        except (RuntimeError, TimeoutError) as exc:
            problems[job.name] = str(exc)
    return problems


def measure(jobs: Sequence[Job], window_s: float) -> dict[str, dict[str, Any]]:
    """Meters every running job over one ``window_s`` window; returns name -> metrics."""
    live = [j for j in jobs if j.proc is not None and j.proc.alive()]
    meters = {j.name: Meter(j.proc) for j in live if j.proc is not None}
    stop = threading.Event()
    errors: list[str] = []
    urls = [j.scrape_url for j in live if j.scrape_url]
    scraper = threading.Thread(target=_scraper, args=(urls, stop, errors), daemon=True)
    scraper.start()
    t0 = time.monotonic()
    measure_window(list(meters.values()), window_s)
    stop.set()
    out: dict[str, dict[str, Any]] = {}
    for job in jobs:
        if job.name in meters:
            res = meters[job.name].to_dict()
            if "gpuwatch" in job.command:  # where the CPU went inside the window, by thread
                res["threads_ms_per_s"] = _named(meters[job.name])
        else:
            res = {"error": f"not running at the start of the window: "
                            f"{job.proc.log_tail(600) if job.proc else 'never started'}"}
        res["command"] = " ".join(Path(job.command[0]).name if i == 0 else a for i, a in enumerate(job.command))
        res["window_s"] = round(time.monotonic() - t0, 1)
        if job.note:
            res["note"] = job.note
        if job.scrape_url:
            res["scraped_every_s"] = SCRAPE_EVERY_S
        out[job.name] = res
    if errors:
        out["_scrape_errors"] = {"errors": errors[:10]}
    return out


def _named(meter: Meter) -> dict[str, float]:
    """A meter's per-thread CPU (ms per second), threads named as Python names them (py-spy dump)."""
    from benchmarks.daemon_cpu import thread_names

    names = thread_names(meter.proc.pid) if meter.threads_ms_per_s else {}
    rows: dict[str, float] = {}
    for tid, ms in sorted(meter.threads_ms_per_s.items(), key=lambda kv: -kv[1]):
        name = names.get(tid) or ("MainThread" if tid == meter.proc.pid else f"thread {tid}")
        rows[name] = round(rows.get(name, 0.0) + ms, 2)
    return rows


def stop_jobs(jobs: Sequence[Job]) -> None:
    for job in jobs:
        if job.proc is not None:
            job.proc.stop()
