"""A process blocked writing into a pipe nobody drains (its log or results to a reader that stalled), or into a
terminal that does not keep up, for real: the kernel says it sends (a pipe's wait channel; for a terminal, whose
writer sleeps where a reader would, the blocked call), so the doctor says what does not take what it sends,
not that it waits for input and not that a server has no work."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.attribution import attribution_line
from gpuwatch.doctor.window import summarise

from .live import on_idle_gpu

WRITER = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n    sys.stdout.flush()\n"


def blocked(code: str, out: int, kept: int, channel: str) -> Iterator[subprocess.Popen[bytes]]:
    """``code`` writing to ``out``, whose other end ``kept`` stays open and unread, once it sleeps in ``channel``
    (the buffer is full and the writer blocks)."""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=out)
    os.close(out)
    deadline = time.monotonic() + 10
    while channel not in Path(f"/proc/{child.pid}/wchan").read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    yield child
    child.kill()
    child.wait()
    os.close(kept)


@pytest.fixture
def blocked_writer() -> Iterator[subprocess.Popen[bytes]]:
    read_end, write_end = os.pipe()
    yield from blocked(WRITER, write_end, read_end, "pipe_write")


def test_a_writer_blocked_on_a_full_pipe_is_waiting_on_a_peer_not_on_input(
        blocked_writer: subprocess.Popen[bytes]) -> None:
    snaps = on_idle_gpu(blocked_writer.pid, polls=5, every_s=0.3)
    p = summarise(snaps)[0].processes[0]
    assert "blocked sending (a full pipe or socket)" in attribution_line(p)
    assert "waiting for input" not in attribution_line(p)
    f = top_problem(diagnose(snaps))
    assert f is not None and f.code == "off_cpu_wait", f
    assert "a peer that does not take what it sends" in f.title
    assert any("blocked sending into a full pipe or socket" in e for e in f.evidence), f.evidence
    assert "demand_bound" not in {g.code for g in diagnose(snaps)}


#: A loop that prints a line per step to its terminal.
PRINTER = "while True:\n    print('step done, loss 0.125 ' * 10, flush=True)\n"


@pytest.fixture
def blocked_printer() -> Iterator[subprocess.Popen[bytes]]:
    """Its terminal (a pty) is never read: the pty's buffer fills and the printer blocks in write()."""
    master, slave = pty.openpty()
    yield from blocked(PRINTER, slave, master, "wait_woken")


def test_a_printer_blocked_on_its_terminal_waits_on_the_terminal_not_on_input(
        blocked_printer: subprocess.Popen[bytes]) -> None:
    snaps = on_idle_gpu(blocked_printer.pid, polls=5, every_s=0.3)
    if all(p.write_target is None for s in snaps for p in s.processes):
        pytest.skip("/proc/PID/task/TID/syscall is not readable here")
    p = summarise(snaps)[0].processes[0]
    assert p.write_target is not None and p.write_target.startswith("/dev/pts/"), p.write_target
    assert "waiting for input" not in attribution_line(p), attribution_line(p)
    findings = diagnose(snaps)
    f = top_problem(findings)
    assert f is not None and f.code == "off_cpu_wait" and f.mechanism == "peer_send", f
    assert "a terminal that does not keep up with its output" in f.title
    assert any(f"a terminal, {p.write_target}" in e for e in f.evidence), f.evidence
    assert "QueueHandler" in f.fix and "demand_bound" not in {g.code for g in findings}
