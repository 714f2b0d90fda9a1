"""Waiting for a daemon started as a process to serve: one loop for the tests and the benchmarks."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import requests


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0, *,
                 log: Callable[[], str] = lambda: "", any_answer: bool = False) -> None:
    """Until ``url``/healthz answers 200 (a snapshot is flowing; serving starts before the first tick), or
    any answer with ``any_answer``. AssertionError with ``log()`` when the daemon exits or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get(url + "/healthz", timeout=2).status_code == 200 or any_answer:
                return
        except requests.RequestException:
            pass
        if proc.poll() is not None:
            raise AssertionError(f"the daemon exited with {proc.returncode}: {log()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the daemon was not healthy within {timeout:g} s: {log()}")
        time.sleep(0.1)
