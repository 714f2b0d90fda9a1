"""Real processes for the tests that read them through /proc: a Python child, handed over once it says it runs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def python_child(code: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``python -c code args``, yielded once it has printed "ready" (Popen returns when the exec begins, before
    the program runs or the kernel has set its command line), killed and reaped on leaving."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()
