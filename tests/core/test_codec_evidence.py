"""The doctor's evidence in the JSON form of a Snapshot: stacks, feeders and upstream survive a round trip
exactly, a wrong shape is named, and a hostile document cannot build a huge object."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuwatch.model.codec import (
    MAX_FEEDERS,
    MAX_FRAMES,
    MAX_STACK_SAMPLES,
    SnapshotFormatError,
    dropped_by_cap,
    dumps,
    loads,
    snapshot_to_dict,
)
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import HostSample, Snapshot
from gpuwatch.model.stacks import Frame, StackSample, ThreadStack

STACK = StackSample(pid=558, time=1_700_000_000.5, span_s=4.0, native=True, stacks=(
    ThreadStack(tid=601, count=37, gil=True, frames=(
        Frame("cudaStreamSynchronize", native=True, module="libcudart.so.12"),
        Frame("synchronize", "/usr/lib/python3/torch/cuda/__init__.py", 892),
        Frame("train_step", "train.py", 41))),
    ThreadStack(tid=558, count=3, idle=True, frames=(Frame("get", "queue.py", 171),)),
))
FEEDER = FeederSample(pid=559, feeds=558, relation="child", name="pt_data_worker", cmdline="python train.py",
                      cpu_percent=99.5, top_thread_cpu_percent=99.0, num_threads=3, thread_waits=("cpu", "io"),
                      run_wait_percent=1.5, threads_in_io_wait=1, io_read_bytes_s=3.5e8, io_write_bytes_s=0.0)
SNAP = Snapshot(time=1_700_000_001.0, host=HostSample("node-1"),
                processes=(ProcessSample(558, 0, upstream="tree"), ProcessSample(700, 1, upstream="external")),
                stacks=(STACK,), feeders=(FEEDER,))


def test_stacks_feeders_and_upstream_survive_a_round_trip_exactly() -> None:
    assert loads(dumps(SNAP)) == SNAP


def test_a_recording_made_before_the_evidence_existed_reads_as_without_it() -> None:
    data = snapshot_to_dict(SNAP)
    for key in ("stacks", "feeders"):
        del data[key]
    for p in data["processes"]:
        del p["upstream"]
    snap = loads(json.dumps(data))
    assert snap.stacks == () and snap.feeders == () and {p.upstream for p in snap.processes} == {None}


def test_unknown_keys_in_the_evidence_are_ignored() -> None:
    data = snapshot_to_dict(SNAP)
    data["stacks"][0]["sampler"] = "py-spy 9"
    data["stacks"][0]["stacks"][0]["frames"][0]["inlined"] = True
    data["feeders"][0]["cgroup"] = "/x"
    assert loads(json.dumps(data)) == SNAP


def _mutated(path: tuple[Any, ...], value: Any) -> str:
    data = snapshot_to_dict(SNAP)
    target: Any = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return json.dumps(data)


@pytest.mark.parametrize(("path", "value", "named"), [
    (("stacks", 0, "pid"), "558", "stacks[0].pid"),
    (("stacks", 0, "stacks"), {"tid": 1}, "stacks[0].stacks"),
    (("stacks", 0, "stacks", 0, "count"), 1.5, "stacks[0].stacks[0].count"),
    (("stacks", 0, "stacks", 0, "frames"), "cudaStreamSynchronize", "stacks[0].stacks[0].frames"),
    (("stacks", 0, "stacks", 0, "frames", 1, "line"), "892", "stacks[0].stacks[0].frames[1].line"),
    (("stacks", 0, "stacks", 0, "frames", 0, "native"), "yes", "stacks[0].stacks[0].frames[0].native"),
    (("stacks", 0, "stacks", 0, "frames", 0), ["sync"], "stacks[0].stacks[0].frames[0]"),
    (("feeders", 0, "relation"), "cousin", "feeders[0].relation"),
    (("feeders", 0, "thread_waits"), "cpu", "feeders[0].thread_waits"),
    (("feeders", 0, "feeds"), None, "feeders[0].feeds"),
    (("processes", 0, "upstream"), 3, "processes[0].upstream"),
    (("stacks",), {"pid": 1}, "stacks"),
])
def test_a_wrong_shape_is_named(path: tuple[Any, ...], value: Any, named: str) -> None:
    with pytest.raises(SnapshotFormatError, match=named.replace("[", r"\[").replace("]", r"\]")):
        loads(_mutated(path, value))


def test_a_hostile_document_is_capped_and_says_what_was_dropped() -> None:
    data = snapshot_to_dict(SNAP)
    sample = data["stacks"][0]
    sample["stacks"][0]["frames"] = sample["stacks"][0]["frames"] * (MAX_FRAMES // 3 + 10)
    data["stacks"] = [sample] * (MAX_STACK_SAMPLES + 5)
    data["feeders"] = data["feeders"] * (MAX_FEEDERS + 7)
    snap = loads(json.dumps(data))
    assert len(snap.stacks) == MAX_STACK_SAMPLES and len(snap.feeders) == MAX_FEEDERS
    assert all(len(t.frames) == MAX_FRAMES for s in snap.stacks for t in s.stacks[:1])
    dropped = dropped_by_cap(snap)
    assert dropped is not None and "5 stack sample(s)" in dropped and "7 feeder(s)" in dropped
    assert f"{(len(STACK.stacks[0].frames) * (MAX_FRAMES // 3 + 10) - MAX_FRAMES) * MAX_STACK_SAMPLES} frame(s)" \
        in dropped


def test_frames_are_written_without_their_defaults_and_read_back_exactly() -> None:
    frames = (Frame("f"), Frame("g", "a.py", 0), Frame("h", native=True, module="libc.so.6"))
    snap = Snapshot(time=1.0, host=HostSample("h"), stacks=(StackSample(1, 1.0, 4.0, (ThreadStack(1, frames),)),))
    written = snapshot_to_dict(snap)["stacks"][0]["stacks"][0]["frames"]
    assert written == [{"function": "f"}, {"function": "g", "file": "a.py", "line": 0},
                       {"function": "h", "native": True, "module": "libc.so.6"}]
    assert loads(dumps(snap)) == snap
