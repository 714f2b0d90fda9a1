"""``gpuwatch daemon`` as a real child process: its own fd limits, its own log, signals that really arrive."""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests
from healthz import wait_healthy

from daemon.test_prometheus import free_port


class DaemonProcess:
    """Start ``gpuwatch daemon --config CONFIG --replay RECORDING``; :attr:`url` once it serves.

    Without a config it listens on a free port of 127.0.0.1 with the built-in defaults, as a new user's
    first ``--replay`` does; ``env`` replaces the environment (a throwaway HOME, say)."""

    def __init__(self, config: Path | None, recording: Path, log: Path, *, fds: tuple[int, int] | None = None,
                 extra: tuple[str, ...] = (), wait: bool = True, env: dict[str, str] | None = None) -> None:
        self.log = log
        where = ("--config", str(config)) if config is not None else ("--listen", f"127.0.0.1:{free_port()}")

        def limit() -> None:
            if fds is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, fds)

        self.proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", *where,
                                      "--replay", str(recording), *extra],
                                     stdout=subprocess.DEVNULL, stderr=log.open("wb"), preexec_fn=limit, env=env)
        self.url = ""
        if wait:
            self.url = self.wait_serving()

    def wait_serving(self, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(r"serving on (http://[\d.]+:\d+)", self.log.read_text(errors="replace"))
            if m:
                return m.group(1)
            assert self.proc.poll() is None, f"the daemon exited: {self.log.read_text()}"
            time.sleep(0.05)
        raise AssertionError(f"the daemon did not start: {self.log.read_text()}")

    def wait_healthy(self, timeout: float = 20.0) -> None:
        """Until /healthz answers 200 (a snapshot is flowing); serving starts before the first tick."""
        wait_healthy(self.url, self.proc, timeout, log=self.log.read_text)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def healthz(self, timeout: float = 5.0) -> requests.Response:
        return requests.get(self.url + "/healthz", timeout=timeout)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then the exit status (SIGKILL and an AssertionError when it ignores SIGTERM)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"the daemon ignored SIGTERM for {timeout} s") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
