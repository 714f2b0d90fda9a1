"""``--stacks``: py-spy (for real) samples the busy thread of a Python process and names its function."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from gpuwatch.model.stacks import StackProfile
from gpuwatch.sources.stacks import StackSampler, pick_thread

TOKENISER = """
import threading, time
def encode(text):
    return [hash(w) for w in text.split()]
def serve():
    while True:
        encode("the quick brown fox " * 200)
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print('ready', flush=True)
serve()
"""


@pytest.fixture
def tokeniser() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", TOKENISER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


def test_py_spy_names_the_function_the_busy_thread_spends_its_time_in(tokeniser: subprocess.Popen[str]) -> None:
    sampler = StackSampler()
    if sampler.exe is None:
        pytest.skip("py-spy is not installed (it comes with the [test] extra)")
    for _ in range(8):
        sampler.sample(tokeniser.pid, tokeniser.pid)
    if sampler.problem:
        pytest.skip(sampler.problem)  # no ptrace permission in this sandbox
    profile = sampler.profiles()[tokeniser.pid]
    assert profile.samples == 8 and profile.tid == tokeniser.pid
    frames = dict(profile.top)
    assert sum(share for frame, share in frames.items() if ":encode" in frame or ":serve" in frame) > 0.9
    assert "samples of thread" in profile.evidence()


def test_without_py_spy_the_sampler_says_so_once_and_samples_nothing() -> None:
    sampler = StackSampler(exe=None)
    sampler.exe = None
    sampler.problem = "--stacks: py-spy is not installed"
    sampler.sample(1, None)
    assert sampler.profiles() == {}


def test_a_missing_binary_is_reported_not_raised() -> None:
    sampler = StackSampler(exe="/nonexistent/py-spy")
    sampler.sample(1, None)
    assert sampler.problem is not None and "py-spy failed" in sampler.problem


def test_the_thread_is_chosen_by_os_id_then_by_the_gil() -> None:
    threads = [{"os_thread_id": 1, "active": False, "owns_gil": False, "frames": []},
               {"os_thread_id": 2, "active": True, "owns_gil": True, "frames": []}]
    assert pick_thread(threads, 1) is threads[0]
    assert pick_thread(threads, 99) is threads[1]


def test_profile_evidence_lists_the_top_frames_with_shares() -> None:
    p = StackProfile(7, 7, 20, (("tokenizer.py:encode", 0.62), ("model.py:forward", 0.2)))
    assert p.evidence() == "py-spy, 20 samples of thread 7: 62% of samples in tokenizer.py:encode; " \
                           "20% of samples in model.py:forward"
