"""A fault variant started as its own process group on the CPU, as the doctor sees one (``conftest.stop``
kills the group)."""

from __future__ import annotations

import subprocess
import sys


def started(fault: str, duration: float) -> subprocess.Popen[str]:
    """``gpuwatch workload --fault FAULT --device cpu`` once it says it is ready (its injected work running)."""
    from gpuwatch.workload.config import READY_LINE

    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "workload", "--fault", fault, "--device", "cpu",
                             "--duration", str(duration)], stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith(READY_LINE):
            return proc
    raise AssertionError(f"{fault} exited before it was ready: {proc.wait()}")
