"""A process blocked on a file lock another process holds (flock: a cache or a download guarded by a lock
file), for real: the kernel's wait channel says it waits on a file lock, /proc/locks names the holder, and
the doctor says both rather than "asleep elsewhere"."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.attribution import attribution_line
from gpuwatch.doctor.window import summarise
from gpuwatch.sources.file_locks import lock_holder

from .live import on_idle_gpu

TAKE = ("import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n")


@pytest.fixture
def holder_and_waiter(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], subprocess.Popen[str]]]:
    lock = str(tmp_path / "cache.lock")
    holder = subprocess.Popen([sys.executable, "-c", TAKE, lock], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    waiter = subprocess.Popen([sys.executable, "-c", TAKE, lock], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while lock_holder(Path("/proc/locks").read_text(), waiter.pid) is None and time.monotonic() < deadline:
        time.sleep(0.02)  # until it is blocked on the lock (a slow machine takes a while to start Python)
    yield holder, waiter
    for proc in (waiter, holder):
        proc.kill()
        proc.wait()


def test_proc_locks_names_the_holder_of_the_lock_a_process_is_blocked_on() -> None:
    locks = ("4: POSIX  ADVISORY  WRITE 23165 fe:00:2150910 0 EOF\n"
             "5: FLOCK  ADVISORY  WRITE 23164 fe:00:2150910 0 EOF\n"
             "5: -> FLOCK  ADVISORY  WRITE 23167 fe:00:2150910 0 EOF\n")
    assert lock_holder(locks, 23167) == 23164
    assert lock_holder(locks, 23164) is None and lock_holder(locks, 1) is None and lock_holder("", 1) is None


def test_a_process_blocked_on_a_file_lock_is_said_to_wait_on_it_and_on_whom(
        holder_and_waiter: tuple[subprocess.Popen[str], subprocess.Popen[str]]) -> None:
    holder, waiter = holder_and_waiter
    snaps = on_idle_gpu(waiter.pid, polls=5, every_s=0.3)
    p = summarise(snaps)[0].processes[0]
    assert "waiting on a file lock (flock, fcntl)" in attribution_line(p), attribution_line(p)
    assert p.file_lock_holder is not None and p.file_lock_holder[0] == holder.pid
    f = top_problem(diagnose(snaps))
    assert f is not None and f.code == "idle_breakdown", f
    assert "waiting on a file lock" in f.title
    assert any(f"waits on a file lock held by pid {holder.pid} (python" in e for e in f.evidence), f.evidence
