"""The doctor's evidence end to end: a live collector (fake NVML, the real host source, real py-spy) puts stacks
and feeders on its Snapshots, a recording keeps them losslessly, and ``doctor --replay --stacks`` reads them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.fake_pynvml import FakeProcess, make_fake_nvml

from gpuwatch.model.recording import RecordingHeader, RecordingWriter, load
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.model.stack_profile import stack_profiles
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sources.host import HostSource
from gpuwatch.sources.nvml import NvmlSource
from gpuwatch.sources.procfs import read_children
from gpuwatch.sources.stack_source import StackSource

#: The "GPU process" waits on a queue its own child fills (the child tokenises on a core).
FED_BY_A_CHILD = """
import multiprocessing as mp, time
def tokenise(q):
    while True:
        q.put([hash(w) for w in ("the quick brown fox " * 2000).split()])
if __name__ == '__main__':
    mp.set_start_method('fork')
    q = mp.Queue(maxsize=2)
    mp.Process(target=tokenise, args=(q,), daemon=True).start()
    print('ready', flush=True)
    while True:
        q.get()
"""


def test_a_recording_keeps_the_stacks_and_the_feeders_and_replay_reads_them(tmp_path: Path) -> None:
    stacks = StackSource(every_s=1, window_s=1, rate_hz=50)
    if stacks.exe is None:
        pytest.skip("py-spy is not installed (it comes with the [test] extra)")
    proc = subprocess.Popen([sys.executable, "-c", FED_BY_A_CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        fake = make_fake_nvml(processes_per_gpu=0, gpm=False)
        fake.gpus[0].processes = [FakeProcess(pid=proc.pid, used_memory=2**30)]
        fake.gpus[0].util_gpu = 7  # an under-used GPU: its process's stacks are sampled
        collector = LiveCollector([NvmlSource(nvml=fake), HostSource()], stacks=stacks)
        snaps: list[Snapshot] = []
        end = time.monotonic() + 20
        while time.monotonic() < end and not (any(s.stacks for s in snaps) and any(s.feeders for s in snaps)):
            snaps.append(collector.collect())
            time.sleep(0.5)
        collector.close()
    finally:
        for child in read_children(proc.pid):
            os.kill(child, signal.SIGKILL)
        proc.kill()
        proc.wait()
    if stacks.problem:
        pytest.skip(stacks.problem)  # no ptrace permission in this sandbox
    sampled = [s for snap in snaps for s in snap.stacks]
    assert sampled and {s.pid for s in sampled} == {proc.pid}
    feeders = [f for snap in snaps for f in snap.feeders]
    assert any(f.feeds == proc.pid and f.relation == "child" for f in feeders), feeders
    assert any(p.upstream == "tree" for snap in snaps for p in snap.processes), "the queue is fed by its tree"
    assert snaps[-1].source("stacks") is not None and snaps[-1].source("stacks").state == "ok"  # type: ignore[union-attr]

    path = tmp_path / "evidence.ndjson.gz"
    with RecordingWriter(path, RecordingHeader(created=time.time(), interval_s=0.5)) as writer:
        for snap in snaps:
            writer.write(snap)
    again = load(path)
    assert [(s.stacks, s.feeders, s.processes) for s in again] == [(s.stacks, s.feeders, s.processes) for s in snaps]
    assert proc.pid in stack_profiles(again)

    done = subprocess.run([sys.executable, "-m", "gpuwatch", "doctor", "--replay", str(path), "--stacks"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "no sampled stacks" not in done.stderr
