"""The long-running processes the overhead window meters, on the GPU machine and locally, and how their
results map onto the result keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import commands
from benchmarks.overhead import Job
from benchmarks.procs import free_port, start, start_in_pty

#: job name -> (CPU key, RSS key) in the results
KEYS = {"daemon_1s": ("daemon_cpu_pct_1s", "daemon_rss_mib"),
        "daemon_100ms": ("daemon_cpu_pct_100ms", "daemon_rss_mib_100ms"),
        **{name: (f"{name}_cpu_pct", f"{name}_rss_mib") for name in (
            "nvidia_smi_loop", "nvitop_exporter", "tui", "nvitop_tui", "nvitop_default_tui", "gpustat_tui")}}
#: job name -> the key of the bytes per second it wrote to its terminal (pty jobs)
TTY_KEYS = {"tui": "tui_tty_bytes_per_s", "nvitop_tui": "nvitop_tty_bytes_per_s"}
#: jobs run only to be profiled (py-spy), never reported as costs
PROFILED = ("daemon_100ms_profiled", "daemon_1s_profiled", "tui_profiled")
#: py-spy's samples a second per profiled job (default 100): a 1 s daemon uses half a percent of a core, so
#: it needs ten times the rate for a few hundred samples a minute (--nonblocking: the target never pauses)
PROFILE_RATE = {"daemon_1s_profiled": 1000}


def _daemon(name: str, logdir: Path, *sampling: str, note: str = "") -> Job:
    port = free_port()
    cmd = commands.daemon(port, *sampling)
    env = commands.isolated_env(name, logdir)
    return Job(name, cmd, lambda: start(name, cmd, logdir, env), ready_url=f"http://127.0.0.1:{port}/metrics",
               scrape_url=f"http://127.0.0.1:{port}/metrics", note=note)


def _pty(name: str, cmd: list[str], logdir: Path, gpuwatch: bool = False, note: str = "") -> Job:
    """A terminal program; gpuwatch's dashboard has its terminal output kept (``<name>.pty``)."""
    env = commands.isolated_env(name, logdir) if gpuwatch else None
    record = logdir / f"{name}.pty" if gpuwatch else None
    return Job(name, cmd, lambda: start_in_pty(name, cmd, env=env, record=record), note=note)


def gpu_jobs(logdir: Path, profile: bool) -> list[Job]:
    exporter_port = free_port()
    exporter = commands.nvitop_exporter(exporter_port)
    smi = commands.nvidia_smi_loop()
    jobs = [
        _daemon("daemon_1s", logdir, "--interval", "1"),
        _daemon("daemon_100ms", logdir, "--interval", "0.1"),
        Job("nvidia_smi_loop", smi, lambda: start("nvidia_smi_loop", smi, logdir)),
        Job("nvitop_exporter", exporter, lambda: start("nvitop_exporter", exporter, logdir),
            ready_url=f"http://127.0.0.1:{exporter_port}/metrics",
            scrape_url=f"http://127.0.0.1:{exporter_port}/metrics"),
        _pty("tui", commands.tui("--interval", "1"), logdir, gpuwatch=True),
        _pty("nvitop_tui", commands.nvitop("--interval", "1"), logdir, note="same 1 s refresh as gpuwatch"),
        _pty("nvitop_default_tui", commands.nvitop(), logdir, note="nvitop's default refresh"),
        _pty("gpustat_tui", commands.gpustat_loop(1.0), logdir),
    ]
    if profile:
        jobs += [_daemon("daemon_100ms_profiled", logdir, "--interval", "0.1"),
                 _daemon("daemon_1s_profiled", logdir, "--interval", "1"),
                 _pty("tui_profiled", commands.tui("--interval", "1"), logdir, gpuwatch=True)]
    return jobs


def local_jobs(logdir: Path, recording: Path, profile: bool) -> list[Job]:
    """No GPU: the daemon and dashboard replaying a recording at 1 s and 0.1 s cadence."""
    rec = ["--replay", str(recording), "--loop"]
    note = "replaying a recording (no sources polled): the consumers' cost alone"
    jobs = [
        _daemon("daemon_1s", logdir, *rec, "--speed", "1", "--interval", "1", note=note),
        _daemon("daemon_100ms", logdir, *rec, "--speed", "10", "--interval", "0.1", note=note),
        _pty("tui", commands.tui(*rec, "--speed", "1", "--interval", "1"), logdir, gpuwatch=True, note=note),
    ]
    if profile:
        jobs.append(_daemon("daemon_100ms_profiled", logdir, *rec, "--speed", "10", "--interval", "0.1"))
    return jobs


def flatten(measured: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{job: {cpu_pct, rss_mib, tty_bytes_per_s ...}}`` -> flat result keys (``daemon_cpu_pct_1s``,
    ``tui_tty_bytes_per_s`` ...)."""
    out: dict[str, Any] = {}
    for job, (cpu_key, rss_key) in KEYS.items():
        res = measured.get(job)
        if res is not None and res.get("cpu_pct") is not None:
            out[cpu_key], out[rss_key] = res["cpu_pct"], res["rss_mib"]
    for job, key in TTY_KEYS.items():
        res = measured.get(job)
        if res is not None and res.get("tty_bytes_per_s") is not None:
            out[key] = res["tty_bytes_per_s"]
    return out
