"""Stacks as evidence: py-spy (for real) samples the threads of a Python process on an under-used GPU in the
background, and what it saw reaches the Snapshot, the recording and ``doctor --stacks``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import python_child

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Snapshot
from gpuwatch.model.stack_profile import stack_profiles
from gpuwatch.model.stacks import StackProfile, StackSample
from gpuwatch.sources import pyspy
from gpuwatch.sources.stack_source import StackSource, underused

TOKENISER = """
import queue, threading, time
def encode(text):
    return [hash(w) for w in text.split()]
def serve(q):
    while True:
        q.put(encode("the quick brown fox " * 200))
q = queue.Queue(maxsize=4)
threading.Thread(target=serve, args=(q,), daemon=True).start()
print('ready', flush=True)
while True:
    q.get()
    time.sleep(0.001)
"""


@pytest.fixture
def tokeniser() -> Iterator[subprocess.Popen[str]]:
    with python_child(TOKENISER) as proc:
        yield proc


IDLE_GPU = (GpuSample(0, "GPU-0", gpu_util=12.0),)


def _windows(source: StackSource, processes: tuple[ProcessSample, ...], seconds: float) -> list[StackSample]:
    got: list[StackSample] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end and not got:
        source.offer(IDLE_GPU, processes)
        got += source.take()
        time.sleep(0.1)
    return got


def test_py_spy_samples_every_thread_of_a_process_on_an_under_used_gpu(tokeniser: subprocess.Popen[str]) -> None:
    source = StackSource(every_s=1, window_s=1, rate_hz=50)
    if source.exe is None:
        pytest.skip("py-spy is not installed (it comes with the [test] extra)")
    got = _windows(source, (ProcessSample(tokeniser.pid, 0),), 15)
    if source.problem:
        pytest.skip(source.problem)  # no ptrace permission in this sandbox
    source.close()
    assert got and got[0].pid == tokeniser.pid and got[0].span_s == 1.0
    sample = got[0]
    assert sample.samples >= 20
    tids = {s.tid for s in sample.stacks}
    assert tokeniser.pid in tids and len(tids) >= 2  # the main thread and the encoding thread
    worker = [s for s in sample.stacks if s.tid != tokeniser.pid]
    assert any(f.function in ("encode", "serve") for s in worker for f in s.frames if not f.native)
    main = [s for s in sample.stacks if s.tid == tokeniser.pid]
    assert all(not s.frames[-1].native or s.frames[-1].module for s in main)  # innermost first, root last
    snap = Snapshot(time=1.0, host=HostSample("h"), processes=(ProcessSample(tokeniser.pid, 0),), stacks=tuple(got))
    profile = stack_profiles([snap])[tokeniser.pid]
    assert profile.samples > 0 and profile.top[0][1] > 0


def test_a_busy_gpu_is_not_sampled() -> None:
    assert not underused(GpuSample(0, "u", gpu_util=99.0))
    assert underused(GpuSample(0, "u", gpu_util=40.0))
    assert underused(GpuSample(0, "u", gpu_util=None))


def test_without_py_spy_the_source_says_what_is_missing_and_how_to_get_it() -> None:
    source = StackSource(exe="")
    source.exe = None
    source.problem = pyspy.NO_PYSPY
    source.offer(IDLE_GPU, (ProcessSample(1, 0),))
    status = source.status()
    assert status.name == "stacks" and status.state == "ok"  # evidence missing is said, not alerted on
    assert status.message is not None and "pip install" in status.message and "--no-stacks" in status.message
    assert source.take() == ()


def test_a_process_that_is_not_python_is_left_alone_for_a_while() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        source = StackSource(every_s=0.5, window_s=1)
        if source.exe is None:
            pytest.skip("py-spy is not installed")
        _windows(source, (ProcessSample(sleeper.pid, 0),), 4)
        assert source.take() == ()
        message = source.status().message
        assert message is None or "may not read" in message  # not Python: left alone, no problem to say
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_ptrace_help_names_every_way_to_grant_it() -> None:
    text = pyspy.ptrace_help(42)
    for needle in ("CAP_SYS_PTRACE", "AmbientCapabilities", "SYS_PTRACE", "--cap-add", "process 42"):
        assert needle in text


def test_raw_collapsed_stacks_become_frames_innermost_first() -> None:
    raw = ("thread (11191): Thread-1 (work);0x7f38 (libc.so.6);thread_run (libpython3.11.so.1.0);"
           "work (busy2.py:6) 38\n"
           "thread (11190): MainThread;<module> (busy2.py:10);Queue.get (queue.py:171);"
           "at::native::add(at::Tensor const&) (libtorch_cpu.so) 3\n"
           "garbage line\n")
    sample = pyspy.parse_raw(raw, 11190, 5.0, 4.0, True)
    assert sample.samples == 41 and sample.native
    first = sample.stacks[0]
    assert first.tid == 11191 and first.frames[0].label() == "busy2.py:work" and first.frames[0].line == 6
    assert first.frames[-1].native and first.frames[-1].module == "libc.so.6"
    main = sample.stacks[1]
    assert main.frames[0].function == "at::native::add(at::Tensor const&)"
    assert main.frames[0].module == "libtorch_cpu.so"


def test_errors_are_told_apart() -> None:
    assert pyspy.classify_error("Error: Permission Denied (os error 13)") == "ptrace"
    assert pyspy.classify_error("Error: Failed to find python version from target process") == "not_python"
    assert pyspy.classify_error("Failed to unwind native stack") == "native"


def test_profile_evidence_lists_the_top_frames_with_shares() -> None:
    p = StackProfile(7, 7, 20, (("tokenizer.py:encode", 0.62), ("model.py:forward", 0.2)))
    assert p.evidence() == "py-spy, 20 samples of thread 7: 62% of samples in tokenizer.py:encode; " \
                           "20% of samples in model.py:forward"


def test_of_many_parked_threads_the_main_the_busiest_and_the_working_ones_are_kept() -> None:
    """Every thread is sampled at every tick, so a pool of parked threads has as many samples as the working
    one: the main thread, the one the host source named busiest, then those seen in the most distinct stacks."""
    parked = "".join(f"thread ({tid}): pool;worker (pool.py:1);wait (threading.py:2) 40\n" for tid in range(200, 230))
    working = "".join(f"thread (150): loader;load (data.py:{i}) 4\n" for i in range(10))
    named = "thread (120): feeder;feed (train.py:3) 40\n"
    main = "thread (100): MainThread;<module> (train.py:9) 40\n"
    sample = pyspy.parse_raw(parked + working + named + main, 100, 1.0, 4.0, False, prefer=(120,))
    tids = {s.tid for s in sample.stacks}
    assert {100, 120, 150} <= tids and len(tids) == pyspy.MAX_THREADS


def test_a_busy_feeder_of_a_waiting_gpu_process_is_sampled_after_the_gpu_process(
        tokeniser: subprocess.Popen[str]) -> None:
    """The GPU process (here: a sleeper, not Python) first, then its busiest feeder; a quiet feeder is not."""
    from gpuwatch.model.feeders import FeederSample

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        source = StackSource(every_s=1, window_s=1, rate_hz=50)
        if source.exe is None:
            pytest.skip("py-spy is not installed")
        feeders = (FeederSample(tokeniser.pid, sleeper.pid, "child", cpu_percent=95.0),
                   FeederSample(os.getpid(), sleeper.pid, "sibling", cpu_percent=1.0))
        got: list[StackSample] = []
        end = time.monotonic() + 15
        while time.monotonic() < end and not got:
            source.offer(IDLE_GPU, (ProcessSample(sleeper.pid, 0),), feeders)
            got += source.take()
            time.sleep(0.1)
        if source.problem:
            pytest.skip(source.problem)
        source.close()
        assert {s.pid for s in got} == {tokeniser.pid}
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_refused_ptrace_is_said_with_how_to_grant_it(tokeniser: subprocess.Popen[str], tmp_path: Path) -> None:
    """py-spy run as an unprivileged user (here through setpriv, as root) is refused by the kernel: the source
    says which process it could not read and how to grant it, and does not ask for that process again soon."""
    exe = pyspy.find_pyspy()
    setpriv = shutil.which("setpriv")
    if exe is None or setpriv is None or os.geteuid() != 0:
        pytest.skip("needs py-spy, setpriv and root (to drop to an unprivileged user)")
    copy = tmp_path / "py-spy"
    shutil.copy(exe, copy)
    wrapper = tmp_path / "py-spy-as-nobody"
    wrapper.write_text(f"#!/bin/sh\nexec {setpriv} --reuid=65534 --regid=65534 --clear-groups {copy} \"$@\"\n")
    for path in (tmp_path, copy, wrapper):
        path.chmod(0o755)
    source = StackSource(every_s=1, window_s=1, exe=str(wrapper))
    end = time.monotonic() + 10
    while time.monotonic() < end and source.problem is None:
        source.offer(IDLE_GPU, (ProcessSample(tokeniser.pid, 0),))
        time.sleep(0.1)
    status = source.status()
    assert status.state == "ok" and status.message is not None, status
    assert f"process {tokeniser.pid}" in status.message and "CAP_SYS_PTRACE" in status.message
    assert not source._due(tokeniser.pid, time.monotonic())
    assert source.take() == ()


def test_py_spy_installed_with_pip_target_is_found_in_the_folders_bin(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / "py-spy"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python3"))
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert pyspy.find_pyspy() == str(exe)


def test_closing_mid_window_ends_and_reaps_the_recorder(tokeniser: subprocess.Popen[str]) -> None:
    """A one-shot command that stops while py-spy records leaves no recorder behind, not even a zombie: its
    CPU is then counted in the command's own rusage, where what stacks cost is measured."""
    source = StackSource(every_s=1, window_s=30, rate_hz=50)
    if source.exe is None:
        pytest.skip("py-spy is not installed")
    end = time.monotonic() + 10
    while time.monotonic() < end and not source._running:
        source.offer(IDLE_GPU, (ProcessSample(tokeniser.pid, 0),))
        time.sleep(0.05)
    running = list(source._running)
    assert running, source.problem
    source.close()
    assert all(proc.returncode is not None for proc in running)  # waited for: reaped
