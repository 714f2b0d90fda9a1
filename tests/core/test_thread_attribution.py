"""The host source's thread attribution from /proc, driven with synthetic task stat, schedstat and wchan
values: which threads are shown, their CPU and run-queue delay over the interval, and what they wait on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

import gpuwatch.sources.host_threads as threads_module
from gpuwatch.sources.host import HostSource
from gpuwatch.sources.host_threads import ThreadTracker
from gpuwatch.sources.machine import parse_procs_running
from gpuwatch.sources.procfs import read_run_wait

#: One spinning thread among 20 sleeping ones; a line on stdin moves the spinning to a sleeping thread.
SWITCHING = """
import sys, threading, time
switch = threading.Event()
def first():
    while not switch.is_set(): pass
def second():
    switch.wait()
    while True: pass
for _ in range(20): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
threading.Thread(target=first, daemon=True).start()
threading.Thread(target=second, daemon=True).start()
print('ready', flush=True)
sys.stdin.readline()
switch.set()
time.sleep(60)
"""


@pytest.fixture
def switching() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", SWITCHING], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """Wraps the thread reads: each call appends how many threads it was asked for (None: all)."""
    reads: list[int | None] = []
    real = threads_module.read_thread_stats

    def counted(pid: int, tids: tuple[int, ...] | None = None) -> dict[int, tuple[str, float]] | None:
        reads.append(None if tids is None else len(tids))
        return real(pid, tids)

    monkeypatch.setattr(threads_module, "read_thread_stats", counted)
    return reads


def _watch(pid: int, monkeypatch: pytest.MonkeyPatch, full_scan_every_s: float) -> tuple[HostSource, list[int | None]]:
    """A host source that has seen ``pid`` once, with full scans every ``full_scan_every_s``, and the
    thread reads it makes from then on."""
    monkeypatch.setattr(threads_module, "FULL_SCAN_EVERY_S", full_scan_every_s)
    reads = _counting_reads(monkeypatch)
    source = HostSource()
    source.poll(0.0, [pid])
    return source, reads


def _tick(source: HostSource, pid: int) -> dict[str, Any]:
    time.sleep(0.3)
    return source.poll(0.0, [pid]).process_details[pid]


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
    monkeypatch.setattr(threads_module, "read_run_wait", lambda pid, tid: run_wait[tid] + (0.5 if tid == 11 else 0.0))
    monkeypatch.setattr(threads_module, "read_thread_wait_channel", lambda pid, tid: wchans.get(tid))
    tracker = ThreadTracker(10, cpu_base={tid: (c, 0.0) for tid, c in cpu_before.items()},
                            wait_base={tid: (w, 0.0) for tid, w in run_wait.items()})
    threads = {tid: (states[tid], cpu_after[tid]) for tid in cpu_after}
    out = tracker.read(threads, 1.0, process_cpu=0.0, full=True)
    assert out["top_thread_id"] == 11 and out["top_thread_cpu_percent"] == pytest.approx(60.0)
    assert out["thread_cpu_percents"] == (60.0, 25.0, 20.0)  # the idle ones (13, 14) not shown
    assert out["thread_waits"] == ("cpu", "input", "lock")
    assert out["thread_run_wait_percents"] == (50.0, 0.0, 0.0)  # only thread 11 waited for a core
    assert out["run_wait_percent"] == pytest.approx(50.0)


def test_the_first_scan_gives_no_run_delay_rather_than_a_false_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads_module, "read_run_wait", lambda pid, tid: 3.0)
    monkeypatch.setattr(threads_module, "read_thread_wait_channel", lambda pid, tid: None)
    tracker = ThreadTracker(1, cpu_base={1: (0.0, 0.0)})
    out = tracker.read({1: ("R", 0.5)}, 1.0, process_cpu=0.0, full=True)
    assert "run_wait_percent" not in out and out["thread_cpu_percents"] == (50.0,)


def test_a_quiet_process_caught_once_in_io_wait_is_not_held_there_until_its_threads_are_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A process in D state for an instant (a vfork until the child execs, a page fault) when its threads were
    read, then asleep in waitpid: its held thread fields must not keep it in I/O wait for the seconds until
    the next read, since each tick's /proc/PID/stat gives its main thread's state afresh."""
    monkeypatch.setattr(threads_module, "read_run_wait", lambda pid, tid: 0.0)
    monkeypatch.setattr(threads_module, "read_thread_wait_channel", lambda pid, tid: "do_wait")
    monkeypatch.setattr(threads_module, "read_thread_stats", lambda pid, tids=None: {7: ("D", 0.01), 8: ("S", 0.0)})
    tracker = ThreadTracker(7)
    tracker.baseline(0.0, 0.01)
    first = tracker.update(0.5, 0.01, 2.0, main_state="D")
    held = [tracker.update(0.5 + 0.3 * i, 0.01, 0.0, main_state="S") for i in range(1, 5)]
    assert first["threads_in_io_wait"] == 1
    assert [h["threads_in_io_wait"] for h in held] == [0, 0, 0, 0]
    assert all(h["top_thread_id"] == first["top_thread_id"] for h in held)  # the rest is the last read's


@pytest.mark.serial  # spinning threads measured against a whole core: alone, after the parallel part
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


@pytest.mark.serial  # spinning threads measured against a whole core: alone, after the parallel part
def test_between_full_scans_a_busy_process_has_only_its_hot_threads_read(
        switching: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch) -> None:
    source, reads = _watch(switching.pid, monkeypatch, 60.0)
    first = _tick(source, switching.pid)  # the first rates: every thread read once more
    reads.clear()
    ticks = [_tick(source, switching.pid) for _ in range(4)]
    assert first["top_thread_cpu_percent"] > 60, first
    assert all(n is not None and n <= 3 for n in reads), reads  # the main thread and the spinner, of 23
    assert all(t["top_thread_id"] == first["top_thread_id"] and t["top_thread_cpu_percent"] > 60 for t in ticks)


@pytest.mark.serial  # spinning threads measured against a whole core: alone, after the parallel part
def test_a_thread_that_starts_working_between_full_scans_is_found_at_the_next_tick(
        switching: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch) -> None:
    source, reads = _watch(switching.pid, monkeypatch, 60.0)  # only the unexplained CPU can find it
    _tick(source, switching.pid)
    before = _tick(source, switching.pid)
    assert switching.stdin is not None
    switching.stdin.write("switch\n")
    switching.stdin.flush()
    reads.clear()
    time.sleep(0.3)  # the second thread spins from here on, the first has stopped
    after = [_tick(source, switching.pid) for _ in range(2)]
    assert None in reads  # the hot threads no longer explained the process's CPU: every thread read
    assert after[-1]["top_thread_id"] != before["top_thread_id"], (before, after)
    assert after[-1]["top_thread_cpu_percent"] > 60, after


@pytest.mark.serial  # spinning threads measured against a whole core: alone, after the parallel part
def test_every_thread_is_read_again_once_the_full_scan_is_due(
        switching: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch) -> None:
    source, reads = _watch(switching.pid, monkeypatch, 0.5)
    reads.clear()
    for _ in range(6):  # 1.8 s of ticks
        _tick(source, switching.pid)
    assert 2 <= reads.count(None) <= 4 and len(reads) == 6, reads  # a full scan every other tick or so


def test_a_quiet_process_has_its_hot_threads_read_between_full_scans_too(monkeypatch: pytest.MonkeyPatch) -> None:
    code = ("import threading, time\n"
            "for _ in range(20): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "time.sleep(60)")
    quiet = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.5)  # past the interpreter's start-up
        monkeypatch.setattr(threads_module, "THREADS_EVERY_S", 0.2)
        source, reads = _watch(quiet.pid, monkeypatch, 60.0)
        first = _tick(source, quiet.pid)
        reads.clear()
        for _ in range(3):
            details = _tick(source, quiet.pid)
        assert first["num_threads"] == 21 and details["threads_running"] == 0
        assert reads and all(n is not None and n <= 2 for n in reads), reads  # its main thread, not 21
    finally:
        quiet.kill()
        quiet.wait()
