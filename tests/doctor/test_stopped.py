"""A process that something outside it stops (SIGSTOP from a job controller, a debugger, a cgroup freezer):
for real, a child stopped with SIGSTOP and read by the host source as the sampler reads it. The doctor says
it is stopped and how to find who stops it, not that it is "asleep elsewhere" or busy where its stacks
were frozen."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest
from processes import python_child

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.attribution import time_split
from gpuwatch.doctor.window import summarise

from .live import on_idle_gpu

WORK = "import time\nprint('ready', flush=True)\nwhile True:\n    sum(i * i for i in range(20000)); time.sleep(0.002)\n"


@pytest.fixture
def stopped_child() -> Iterator[subprocess.Popen[str]]:
    with python_child(WORK) as child:
        os.kill(child.pid, signal.SIGSTOP)
        yield child
        os.kill(child.pid, signal.SIGCONT)


def test_a_stopped_process_is_said_to_be_stopped_with_the_way_to_find_who_stops_it(
        stopped_child: subprocess.Popen[str]) -> None:
    snaps = on_idle_gpu(stopped_child.pid, polls=6, every_s=0.3)
    p = summarise(snaps)[0].processes[0]
    assert p.stopped_share == 1.0 and time_split(p)["stopped"] >= 90.0
    f = top_problem(diagnose(snaps))
    assert f is not None and f.code == "idle_breakdown", f
    assert "the feeding process is stopped" in f.title and "asleep elsewhere" not in f.title
    assert any("stopped (state T) or frozen in 100% of samples" in e for e in f.evidence), f.evidence
    assert f"/proc/{stopped_child.pid}/status" in f.fix and "cgroup.events" in f.fix


def test_the_same_process_running_is_not_called_stopped(stopped_child: subprocess.Popen[str]) -> None:
    os.kill(stopped_child.pid, signal.SIGCONT)
    snaps = on_idle_gpu(stopped_child.pid, polls=4, every_s=0.3)
    assert summarise(snaps)[0].processes[0].stopped_share == 0.0
    assert all("stopped" not in f.title for f in diagnose(snaps))
