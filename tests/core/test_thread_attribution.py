"""The host source's thread attribution from /proc, driven with synthetic task stat, schedstat and wchan
values: which threads are shown, their CPU and run-queue delay over the interval, and what they wait on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

import gpuwatch.sources.host as host_module
from gpuwatch.sources.host import HostSource, _Tracked
from gpuwatch.sources.machine import parse_procs_running
from gpuwatch.sources.procfs import read_run_wait


def test_procs_running_is_read_from_proc_stat() -> None:
    assert parse_procs_running(b"cpu  1 2 3 4\nintr 5\nprocs_running 7\nprocs_blocked 0\n") == 7
    assert parse_procs_running(b"cpu  1 2 3 4\n") is None


def test_attribution_follows_the_threads_cpu_run_delay_and_wait_channels(monkeypatch: pytest.MonkeyPatch) -> None:
    # pid 10: main thread 10 and workers 11-13; an idle pool thread 14. Seconds of CPU and of run delay.
    cpu_before = {10: 5.0, 11: 1.0, 12: 1.0, 13: 1.0, 14: 0.0}
    cpu_after = {10: 5.2, 11: 1.6, 12: 1.25, 13: 1.0, 14: 0.0}
    states = {10: "S", 11: "R", 12: "S", 13: "S", 14: "S"}
    run_wait = {10: 0.10, 11: 0.30, 12: 0.20, 13: 0.05}
    wchans = {10: "futex_wait_queue", 12: "ep_poll", 13: "hrtimer_nanosleep", 14: "futex_wait_queue"}
    monkeypatch.setattr(host_module, "read_run_wait", lambda pid, tid: run_wait[tid] + (0.5 if tid == 11 else 0.0))
    monkeypatch.setattr(host_module, "read_thread_wait_channel", lambda pid, tid: wchans.get(tid))
    tracked: Any = _Tracked(proc=None, static={}, last_time=0.0, last_cpu=0.0, last_io=None,
                            last_threads=cpu_before, last_run_wait=run_wait)
    threads = {tid: (states[tid], cpu_after[tid]) for tid in cpu_after}
    out = HostSource._attribution(tracked, 10, threads, 1.0)
    assert out["top_thread_id"] == 11 and out["top_thread_cpu_percent"] == pytest.approx(60.0)
    assert out["thread_cpu_percents"] == (60.0, 25.0, 20.0)  # the idle ones (13, 14) not shown
    assert out["thread_waits"] == ("cpu", "input", "lock")
    assert out["thread_run_wait_percents"] == (50.0, 0.0, 0.0)  # only thread 11 waited for a core
    assert out["run_wait_percent"] == pytest.approx(50.0)


def test_the_first_scan_gives_no_run_delay_rather_than_a_false_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_module, "read_run_wait", lambda pid, tid: 3.0)
    monkeypatch.setattr(host_module, "read_thread_wait_channel", lambda pid, tid: None)
    tracked: Any = _Tracked(proc=None, static={}, last_time=0.0, last_cpu=0.0, last_io=None,
                            last_threads={1: 0.0})
    out = HostSource._attribution(tracked, 1, {1: ("R", 0.5)}, 1.0)
    assert "run_wait_percent" not in out and out["thread_cpu_percents"] == (50.0,)


def test_a_thread_that_waits_for_a_core_shows_its_run_delay_in_schedstat() -> None:
    """Real /proc: more spinning processes than cores make each wait for a core."""
    if read_run_wait(os.getpid(), os.getpid()) is None:
        pytest.skip("this kernel keeps no scheduler statistics (/proc/PID/task/TID/schedstat)")
    spin = [sys.executable, "-c", "while True: pass"]
    procs = [subprocess.Popen(spin) for _ in range(3 * (os.cpu_count() or 1))]
    try:
        time.sleep(0.5)
        before = read_run_wait(procs[0].pid, procs[0].pid)
        time.sleep(1.0)
        after = read_run_wait(procs[0].pid, procs[0].pid)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert before is not None and after is not None and after - before > 0.1  # > 10 % of the second
