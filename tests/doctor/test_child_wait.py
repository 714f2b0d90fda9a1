"""A process that waits for a child to exit (``subprocess.run`` per batch: a tokenizer, ffmpeg, a compiler), for
real: the kernel's wait channel (``do_wait``) says it waits for a child, and the busy child is what it waits on."""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import python_child

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.attribution import attribution_line
from gpuwatch.doctor.window import summarise

from .live import on_idle_gpu
from .synthetic import Load, window

PARENT = ("import subprocess, sys\nprint('ready', flush=True)\n"
          "subprocess.run([sys.executable, '-c', sys.argv[1]])\n")


@pytest.fixture
def parent_of(request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[str]]:
    with python_child(PARENT, request.param) as proc:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        deadline = time.monotonic() + 10
        while not children.read_text().split() and time.monotonic() < deadline:  # it has begun to wait for its child
            time.sleep(0.02)
        yield proc
        subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)


@pytest.mark.serial  # the child's CPU is measured against the busy-feeder bound: alone, after the parallel part
@pytest.mark.parametrize("parent_of", ["while True: pass"], indirect=True)
def test_a_process_waiting_for_a_busy_child_is_held_back_by_that_child(parent_of: subprocess.Popen[str]) -> None:
    snaps = on_idle_gpu(parent_of.pid, polls=8, every_s=0.3)
    p = summarise(snaps)[0].processes[0]
    assert "waiting for a child process to exit (waitpid)" in attribution_line(p), attribution_line(p)
    f = top_problem(diagnose(snaps))
    assert f is not None and f.code == "feeder_bound", f
    assert any("child" in e for e in f.evidence), f.evidence


@pytest.mark.parametrize("parent_of", ["import time; time.sleep(60)"], indirect=True)
def test_a_process_waiting_for_a_sleeping_child_says_so_rather_than_asleep_elsewhere(
        parent_of: subprocess.Popen[str]) -> None:
    snaps = on_idle_gpu(parent_of.pid, polls=5, every_s=0.3)
    f = top_problem(diagnose(snaps))
    assert f is not None and "waiting for a child process to exit" in f.title and "elsewhere" not in f.title, f


def test_a_few_samples_in_d_state_do_not_turn_a_wait_for_a_child_into_storage() -> None:
    """A parent caught in D state in two samples of ten (the vfork until its child execs, a page fault) and in
    do_wait the rest: its finding is the child it waits for, never "storage holds the GPU back" under a line
    that says its main thread waits in do_wait."""
    snaps = window(Load(util=5.0, sm=4.0, thread=1.0, waits=("child",), channel="do_wait"))
    for i in (0, 5):
        p = dataclasses.replace(snaps[i].processes[0], threads_in_io_wait=1, thread_waits=("io",), state="D",
                                wait_channel="wait_for_vfork_done")
        snaps[i] = dataclasses.replace(snaps[i], processes=(p,))
    findings = diagnose(snaps)
    f = top_problem(findings)
    assert f is not None and "waiting for a child process to exit" in f.title, f
    assert all(x.code != "off_cpu_wait" for x in findings), [x.title for x in findings]
