"""The workload tests' fixtures."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def stop() -> Iterator[list[subprocess.Popen[str]]]:
    """Append the started variants: their process groups (children, peers that share it) are killed after."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
