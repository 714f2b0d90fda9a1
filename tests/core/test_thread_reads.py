"""Reading every thread of a process: a thread that slept and has not run since keeps what its stat said
(its stat file is not read again), and one that ran is read afresh."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from gpuwatch.sources import held_files, procfs

pytestmark = pytest.mark.skipif(not psutil.LINUX, reason="/proc is Linux's")

#: Twenty threads that sleep; a line on stdin wakes one that spins until the next line, then sleeps again.
WAKING = """
import sys, threading, time
spin = threading.Event()
stop = threading.Event()
def waker():
    spin.wait()
    while not stop.is_set(): pass
    time.sleep(60)
for _ in range(20): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
worker = threading.Thread(target=waker, daemon=True)
worker.start()
print(worker.native_id, flush=True)
sys.stdin.readline()
spin.set()
print('spinning', flush=True)
sys.stdin.readline()
stop.set()
print('stopped', flush=True)
time.sleep(60)
"""


@pytest.fixture
def waking() -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc = subprocess.Popen([sys.executable, "-c", WAKING], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    worker = int(proc.stdout.readline())
    time.sleep(0.3)  # past the interpreter's start-up
    yield proc, worker
    proc.kill()
    proc.wait()
    procfs.forget(proc.pid)


def _stat_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread stat files read from now on."""
    paths: list[str] = []
    real = held_files.read

    def counted(owner: int, path: str, size: int = 4096) -> bytes:
        if path.endswith("/stat") and "/task/" in path:
            paths.append(path)
        return real(owner, path, size)

    monkeypatch.setattr(held_files, "read", counted)
    return paths


def _say(proc: subprocess.Popen[str], answer: str) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == answer


def test_threads_that_slept_since_the_last_full_read_keep_their_state_and_cpu_unread(
        waking: tuple[subprocess.Popen[str], int], monkeypatch: pytest.MonkeyPatch) -> None:
    proc, _ = waking
    first = procfs.read_thread_stats(proc.pid)
    reads = _stat_reads(monkeypatch)
    again = procfs.read_thread_stats(proc.pid)
    assert first is not None and len(first) == 22 and again == first
    sleepers = [tid for tid, (state, _) in first.items() if state == "S"]
    assert len(sleepers) >= 20
    assert len(reads) <= len(first) - len(sleepers) + 1, reads  # at most the main thread's, which may have run


def test_a_thread_that_ran_since_the_last_full_read_is_read_afresh(
        waking: tuple[subprocess.Popen[str], int]) -> None:
    proc, worker = waking
    before = procfs.read_thread_stats(proc.pid)
    _say(proc, "spinning")
    time.sleep(0.5)
    spinning = procfs.read_thread_stats(proc.pid)
    _say(proc, "stopped")
    time.sleep(0.3)
    after = procfs.read_thread_stats(proc.pid)
    assert before is not None and spinning is not None and after is not None
    assert before[worker][0] == "S"
    assert spinning[worker][0] == "R" and spinning[worker][1] > before[worker][1]  # woke, and its CPU moved
    assert after[worker][0] == "S" and after[worker][1] >= spinning[worker][1]  # asleep again
    assert {tid for tid in after if tid != worker} == {tid for tid in before if tid != worker}


#: Twenty sleeping threads; on a line of stdin, a thread of its own starts ``sleep`` and ends after the
#: seconds the line gives (the main thread stays asleep in its read of stdin meanwhile).
SPAWNING = """
import subprocess, sys, threading, time
for _ in range(20): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
def spawn(seconds):
    child = subprocess.Popen(['sleep', '60'])
    print(child.pid, flush=True)
    time.sleep(seconds)
print('ready', flush=True)
for line in sys.stdin:
    threading.Thread(target=spawn, args=(float(line),), daemon=True).start()
"""


@pytest.fixture
def spawning() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", SPAWNING], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    yield proc
    for child in procfs.read_children(proc.pid):
        subprocess.run(["kill", "-9", str(child)], check=False)
    proc.kill()
    proc.wait()
    procfs.forget(proc.pid)


def _children_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    paths: list[str] = []
    real = procfs._read_small

    def counted(path: str) -> bytes:
        if path.endswith("/children"):
            paths.append(path)
        return real(path)

    monkeypatch.setattr(procfs, "_read_small", counted)
    return paths


def _ask(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def test_the_children_of_threads_that_slept_are_not_read_again_and_a_new_child_is_found(
        spawning: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert procfs.read_children(spawning.pid, depth=1) == []
    reads = _children_reads(monkeypatch)
    assert procfs.read_children(spawning.pid, depth=1) == []
    assert len(reads) <= 2, reads  # of 21 threads: the main one at most (and one that woke by chance)
    child = int(_ask(spawning, "60"))
    time.sleep(0.2)
    assert procfs.read_children(spawning.pid, depth=1) == [child]


def test_when_a_thread_ends_its_children_are_found_under_the_thread_that_took_them(
        spawning: subprocess.Popen[str]) -> None:
    child = int(_ask(spawning, "1"))
    time.sleep(0.2)
    assert procfs.read_children(spawning.pid, depth=1) == [child]
    time.sleep(1.2)  # the spawning thread has ended: the main thread, asleep all along, took its child
    assert len(os.listdir(f"/proc/{spawning.pid}/task")) == 21
    assert procfs.read_children(spawning.pid, depth=1) == [child]


def test_every_threads_children_are_read_again_once_the_reread_is_due(
        spawning: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procfs, "CHILDREN_REREAD_S", 0.0)  # every read of them all is due
    procfs.read_children(spawning.pid, depth=1)
    reads = _children_reads(monkeypatch)
    procfs.read_children(spawning.pid, depth=1)
    assert len(reads) == 21, reads  # each thread's file, slept or not
