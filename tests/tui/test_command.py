"""The COMMAND column shows what tells processes apart, not the interpreter's path and flags."""

from __future__ import annotations

import pytest

from gpuwatch.model.snapshot import ProcessSample
from gpuwatch.tui.command import display_command

SPAWN = ("/opt/torch/.venv/bin/python3 -B -c from multiprocessing.spawn import spawn_main; "
         "spawn_main(tracker_fd=4, pipe_handle=6) --multiprocessing-fork")


@pytest.mark.parametrize(("cmdline", "ppid", "shown"), [
    (SPAWN, 554, "[mp worker of 554] spawn_main(tracker_fd=4, pipe_handle=6)"),
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
def test_display_command(cmdline: str, ppid: int, shown: str) -> None:
    assert display_command(ProcessSample(pid=10, gpu_index=0, ppid=ppid, name="x", cmdline=cmdline)) == shown


def test_without_a_command_line_the_name_or_a_dash() -> None:
    assert display_command(ProcessSample(pid=10, gpu_index=0, name="cuda-app")) == "cuda-app"
    assert display_command(ProcessSample(pid=10, gpu_index=0)) == "-"
