"""Held /proc files: a re-read is fresh, a gone process's file fails and is closed, and a reader that
stops following a process or thread closes its files, so the fd table never fills."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

import gpuwatch.sources.host_threads as threads_module
from gpuwatch.sources import held_files
from gpuwatch.sources.host import HostSource
from gpuwatch.sources.procfs import forget, read_cpu_seconds, read_process_stat, read_thread_stats

pytestmark = pytest.mark.skipif(not psutil.LINUX, reason="/proc is Linux's")

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"
THREADS = """
import sys, threading, time
stop = threading.Event()
workers = [threading.Thread(target=stop.wait) for _ in range(6)]
for w in workers: w.start()
print('ready', flush=True)
sys.stdin.readline()
stop.set()
for w in workers: w.join()
print('ended', flush=True)
time.sleep(30)
"""


def _held_of(pid: int) -> list[str]:
    """The paths this thread holds open for ``pid`` (from the fd table, not the module's bookkeeping)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"/proc/{pid}/"):
            out.append(target)
    return out


def test_a_held_file_is_read_afresh_each_time() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        time.sleep(0.3)
        first = read_cpu_seconds(proc.pid)
        assert first is not None
        later = [read_cpu_seconds(proc.pid)]  # the spinner's CPU time grows whatever share of a core it gets
        deadline = time.monotonic() + 10
        while (later[-1] or 0.0) <= first and time.monotonic() < deadline:
            time.sleep(0.1)
            later.append(read_cpu_seconds(proc.pid))
        assert _held_of(proc.pid) == [f"/proc/{proc.pid}/stat"]  # one fd, read again and again
        assert (later[-1] or 0.0) > first, (first, later)  # a held file gives the value of now, not of its opening
    finally:
        proc.kill()
        proc.wait()
        forget(proc.pid)


def test_the_held_file_of_a_process_that_ended_fails_and_is_closed() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    assert read_process_stat(proc.pid) is not None
    held = held_files.held_count()
    proc.kill()
    proc.wait()
    assert read_process_stat(proc.pid) is None
    assert held_files.held_count() == held - 1 and _held_of(proc.pid) == []


def test_forget_closes_a_process_and_its_threads_files() -> None:
    proc = subprocess.Popen([sys.executable, "-c", THREADS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        threads = read_thread_stats(proc.pid)
        assert threads is not None and len(threads) == 7
        assert {p.split("/task/")[1].split("/")[0] for p in _held_of(proc.pid)} == {str(t) for t in threads}
        forget(proc.pid)
        assert _held_of(proc.pid) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_full_scan_closes_the_files_of_threads_that_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads_module, "THREADS_EVERY_S", 0.2)
    monkeypatch.setattr(threads_module, "FULL_SCAN_EVERY_S", 0.5)
    proc = subprocess.Popen([sys.executable, "-c", THREADS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        source = HostSource()
        source.poll(0.0, [proc.pid])
        time.sleep(0.2)
        source.poll(0.0, [proc.pid])
        assert sum("/task/" in p for p in _held_of(proc.pid)) >= 7  # every thread's stat was read
        proc.stdin.write("end\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "ended"
        time.sleep(0.6)  # past the next full scan
        source.poll(0.0, [proc.pid])
        source.poll(0.0, [proc.pid])
        tasks = {p.split("/task/")[1].split("/")[0] for p in _held_of(proc.pid) if "/task/" in p}
        assert tasks == {str(proc.pid)}, tasks  # only the main thread is left, and only its files held
        source.poll(0.0, [])  # the process left the GPU
        assert _held_of(proc.pid) == []
    finally:
        proc.kill()
        proc.wait()


def test_beyond_the_limit_files_are_read_and_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = subprocess.Popen([sys.executable, "-c", THREADS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    found: list[object] = []

    def reader() -> None:  # a thread of its own: its own held files, and its own limit
        monkeypatch.setattr(held_files, "MAX_HELD", 3)
        found.append(read_thread_stats(proc.pid))
        found.append(held_files.held_count())
        found.append(len(_held_of(proc.pid)))

    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        t = threading.Thread(target=reader)
        t.start()
        t.join()
        threads, count, open_now = found
        assert isinstance(threads, dict) and len(threads) == 7  # every thread still read
        assert count == 3 and open_now == 3
        assert _held_of(proc.pid) == []  # the reading thread ended: its files went with it
    finally:
        proc.kill()
        proc.wait()

