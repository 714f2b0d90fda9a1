"""Runs one workload stage as its own process (like a real service) while the live sampler watches it.

The workload prints a ready line once warmed up; only then does the window start, so model building,
CUDA-graph capture and worker start-up stay out of the numbers. Every snapshot also goes to the run's
recording, so the table can be re-derived later with ``gpuwatch doctor --replay``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.window import GpuWindow, summarise
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.sampler import Sampler
from gpuwatch.workload.config import READY_LINE

READY_TIMEOUT_S = 240.0  # model build + CUDA-graph capture of the base model on a cold GPU
EXIT_GRACE_S = 60.0


@dataclass
class StageRun:
    """What one stage gave: the workload's own numbers, the sampled window and the doctor's findings."""

    stage: str
    workload: dict[str, Any] | None = None
    snapshots: list[Snapshot] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    gpu: GpuWindow | None = None
    error: str | None = None
    window: tuple[float, float] | None = None
    #: The row as a finished run recorded it (a run re-rendered from its details has no samples left).
    recorded_row: dict[str, Any] | None = None

    def row(self) -> dict[str, Any]:
        """The incident's table row (percentages 0-100; None where not measured)."""
        if self.recorded_row is not None:
            return dict(self.recorded_row)
        g, w = self.gpu, self.workload or {}
        top = top_problem(self.findings)

        def r(v: Any) -> Any:
            return None if v is None else round(float(v), 1)

        return {"stage": self.stage, "gpu_util": r(g and g.util), "sm_active": r(g and g.sm_active),
                "sm_occupancy": r(g and g.sm_occupancy), "tensor_active": r(g and g.tensor_active),
                "req_per_s": r(w.get("req_per_s")), "p99_ms": r(w.get("p99_ms")),
                "top_finding": (f"failed: {self.error}" if self.error else top.title if top else "-")}


class Workload:
    """The workload process, its stderr watched for the ready line (and kept for error messages)."""

    def __init__(self, argv: list[str]) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     start_new_session=True)  # its own group: a kill takes its workers too
        self.ready = threading.Event()
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.startswith(READY_LINE):
                self.ready.set()
            else:
                self.stderr.append(line.rstrip())

    def last_error(self) -> str:
        lines = [ln for ln in self.stderr if ln.strip() and "Warning" not in ln]
        return lines[-1][:300] if lines else f"exit code {self.proc.returncode}"

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> str | None:
        """None once the workload says it is warm; else why it never will (it exited, or took too long)."""
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.2):
            if self.proc.poll() is not None:
                return self.last_error()
            if time.monotonic() > deadline:
                return "not ready in time"
        return None

    def sample(self, sampler: Sampler, duration: float, interval: float,
               on_sample: Callable[[float], None]) -> list[Snapshot]:
        """Snapshots every ``interval`` for ``duration`` seconds, or until the workload exits."""
        snaps: list[Snapshot] = []
        start = time.monotonic()
        sampler.tick()  # first reading: rates (CPU %, GPM) need a previous one
        while (elapsed := time.monotonic() - start) < duration and self.proc.poll() is None:
            time.sleep(max(0.0, min(interval, duration - elapsed)))
            snap = sampler.tick()
            if snap is not None:
                snaps.append(snap)
            on_sample(min(duration, time.monotonic() - start))
        return snaps

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.wait()


def workload_argv(stage: str, device: str, duration: float, extra: list[str]) -> list[str]:
    # The workload measures a little longer than the sampler watches, so the window falls inside it.
    return [sys.executable, "-m", "gpuwatch", "workload", "--stage", stage, "--device", device,
            "--duration", f"{duration + 0.3:g}", "--json", *extra]


def run_stage(stage: str, device: str, duration: float, sampler: Sampler, interval: float,
              on_sample: Callable[[float], None], extra: list[str] | None = None) -> StageRun:
    """Start the stage, wait until it is warm, sample ``duration`` seconds, collect its result, diagnose."""
    result = StageRun(stage)
    work = Workload(workload_argv(stage, device, duration, extra or []))
    try:
        result.error = work.wait_ready()
        if result.error is not None:
            return result
        result.snapshots = work.sample(sampler, duration, interval, on_sample)
        out, _ = work.proc.communicate(timeout=duration + EXIT_GRACE_S)
        if work.proc.returncode != 0:
            result.error = work.last_error()
        else:
            result.workload = json.loads(out.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        work.kill()
    diagnose_stage(result)
    return result


def diagnose_stage(result: StageRun) -> None:
    snaps = result.snapshots
    if not snaps:
        return
    result.window = (snaps[0].time, snaps[-1].time)
    pid = (result.workload or {}).get("pid")
    on_gpu = bool(pid) and any(p.pid == pid for s in snaps for p in s.processes)
    result.findings = diagnose(snaps, pid=pid if on_gpu else None)
    windows = summarise(snaps, pid if on_gpu else None)
    if windows:  # the workload's GPU, else the busiest one
        result.gpu = max(windows, key=lambda g: g.busy or 0.0)


def diagnose_phases(result: StageRun, settle_s: float) -> None:
    """Under a phase plan: each phase's own GPU medians and doctor's top finding, from the snapshots taken
    while it ran (after its settling time), written into the phase's row."""
    phases = (result.workload or {}).get("phases") or []
    pid = (result.workload or {}).get("pid")
    for phase in phases:
        snaps = [s for s in result.snapshots if phase["wall_start"] + settle_s <= s.time <= phase["wall_end"]]
        phase["samples"] = len(snaps)
        if not snaps:
            continue
        on_gpu = bool(pid) and any(p.pid == pid for s in snaps for p in s.processes)
        windows = summarise(snaps, pid if on_gpu else None)
        gpu = max(windows, key=lambda g: g.busy or 0.0) if windows else None
        top = top_problem(diagnose(snaps, pid=pid if on_gpu else None))
        phase["gpu_util"] = None if gpu is None or gpu.util is None else round(float(gpu.util), 1)
        phase["sm_active"] = None if gpu is None or gpu.sm_active is None else round(float(gpu.sm_active), 1)
        phase["top_finding"] = top.title if top else "-"
