"""A process blocked writing into a pipe nobody drains (its log or results to a reader that stalled), for real:
the kernel's wait channel says it sends, so the doctor says a peer does not take what it sends, not that it
waits for input and not that a server has no work."""

from __future__ import annotations

import os
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


@pytest.fixture
def blocked_writer() -> Iterator[subprocess.Popen[bytes]]:
    read_end, write_end = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", WRITER], stdout=write_end)
    os.close(write_end)
    deadline = time.monotonic() + 10
    while "pipe_write" not in Path(f"/proc/{child.pid}/wchan").read_text() and time.monotonic() < deadline:
        time.sleep(0.02)  # the read end stays open and unread: the pipe fills and the writer blocks
    yield child
    child.kill()
    child.wait()
    os.close(read_end)


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
