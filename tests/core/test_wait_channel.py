"""The main thread's wait channel, read every tick for a GPU process, except when it runs (there is none)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from gpuwatch.sources.host import HostSource

pytestmark = pytest.mark.skipif(not psutil.LINUX, reason="/proc is Linux's")

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"


def test_a_running_main_thread_has_no_wait_channel_and_its_file_is_not_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuwatch.sources.host as host_module

    asked: list[int] = []
    real = host_module.read_wait_channel
    monkeypatch.setattr(host_module, "read_wait_channel", lambda pid: asked.append(pid) or real(pid))
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)
        source = HostSource()
        for _ in range(3):
            details = source.poll(0.0, [spinner.pid, sleeper.pid]).process_details
            time.sleep(0.1)
        assert details[spinner.pid]["state"] == "R" and details[spinner.pid]["wait_channel"] is None
        assert spinner.pid not in asked  # a spinning main thread is always runnable
        assert asked.count(sleeper.pid) == 3
    finally:
        for p in (spinner, sleeper):
            p.kill()
            p.wait()
