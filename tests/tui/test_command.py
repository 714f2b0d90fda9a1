"""The COMMAND column shows what tells processes apart, not the interpreter's path and flags; workers of one
parent are named by the parent's script and their place among their siblings."""

from __future__ import annotations

import pytest

from gpuwatch.model.command import command_labels
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import HostSample, Snapshot

SPAWN = ("/opt/torch/.venv/bin/python3 -B -c from multiprocessing.spawn import spawn_main; "
         "spawn_main(tracker_fd=4, pipe_handle=6) --multiprocessing-fork")


@pytest.mark.parametrize(("cmdline", "ppid", "shown"), [
    (SPAWN, 554, "[mp worker 1 of 554]"),
    ("/usr/bin/python3 -c from multiprocessing.resource_tracker import main;main(5)", 554,
     "[mp resource tracker of 554]"),
    ("/usr/bin/python3 -c from multiprocessing.forkserver import main; main(7, 8)", 9, "[mp forkserver of 9]"),
    ("/opt/venv/bin/python3.11 -u -X importtime /srv/app/serve.py --port 8000", 1, "serve.py --port 8000"),
    ("/opt/venv/bin/python -W ignore -m vllm.entrypoints.openai.api_server --model m", 1,
     "-m vllm.entrypoints.openai.api_server --model m"),
    ("python3 -c print(1)", 1, "python3 -c print(1)"),
    ("/usr/bin/python3", 1, "python3"),
    ("/usr/local/bin/torchrun --nproc-per-node 8 train.py", 1, "torchrun --nproc-per-node 8 train.py"),
    ("/usr/bin/nvidia-smi dmon", 1, "nvidia-smi dmon"),
])
def test_command_label(cmdline: str, ppid: int, shown: str) -> None:
    assert ProcessSample(pid=10, gpu_index=0, ppid=ppid, name="x", cmdline=cmdline).command_label == shown


def test_without_a_command_line_the_name_or_a_dash() -> None:
    assert ProcessSample(pid=10, gpu_index=0, name="cuda-app").command_label == "cuda-app"
    assert ProcessSample(pid=10, gpu_index=0).command_label == "-"
    assert ProcessSample(pid=10, gpu_index=0, name="cuda-app", cmdline="  ").command_label == "cuda-app"


def _worker(pid: int, created: float, ppid: int = 554, gpu: int = 0) -> ProcessSample:
    return ProcessSample(pid=pid, gpu_index=gpu, ppid=ppid, name="python3", cmdline=SPAWN.replace("6)", f"{pid})"),
                         create_time=created)


def test_workers_of_one_parent_are_numbered_oldest_first_and_never_read_alike() -> None:
    younger, older = _worker(603, 1796209122.17), _worker(558, 1796209112.17)
    labels = command_labels([younger, older, _worker(558, 1796209112.17, gpu=1)])
    assert labels == {558: "[mp worker 1 of 554]", 603: "[mp worker 2 of 554]"}


def test_a_worker_is_named_by_its_parents_script_where_the_snapshot_has_the_parent() -> None:
    parent = FeederSample(pid=554, feeds=558, relation="peer", name="python3",
                          cmdline="/opt/venv/bin/python3 -u /srv/app/serve.py --port 8000")
    snap = Snapshot(time=0.0, host=HostSample(hostname="h"), processes=(_worker(558, 1.0), _worker(603, 2.0)),
                    feeders=(parent,))
    assert snap.command_labels() == {558: "serve.py [mp worker 1]", 603: "serve.py [mp worker 2]"}
    launcher = ProcessSample(pid=554, gpu_index=0, cmdline="/usr/bin/python3 -m vllm.entrypoints.api --x 1")
    snap = Snapshot(time=0.0, host=HostSample(hostname="h"), processes=(launcher, _worker(558, 1.0)))
    assert snap.command_labels()[558] == "-m vllm.entrypoints.api [mp worker 1]"
