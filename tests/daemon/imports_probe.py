"""Which modules a real ``gpuwatch daemon`` process holds once it has answered every endpoint.

The daemon runs as ``gpuwatch.cli.main.main(["daemon", ...])`` in a child whose only addition is a SIGUSR1
handler that writes ``sys.modules`` to a file; the requests come from this process over raw sockets, so
nothing the probe does brings a module into the child.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HARNESS = """
import signal, sys
from gpuwatch.cli.main import main

def dump(*_):
    with open(sys.argv[1], "w") as fh:
        fh.write("\\n".join(sorted(sys.modules)))

signal.signal(signal.SIGUSR1, dump)
sys.exit(main(sys.argv[2:]))
"""
PATHS = ("/", "/metrics", "/healthz", "/api/v1/snapshot", "/api/v1/alerts", "/api/v1/diagnosis",
         "/api/v1/history?limit=2", "/api/v1/efficiency", "/api/v1/rollouts")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ask(port: int, method: str, path: str, read_all: bool = True) -> bytes:
    """One request over a raw socket; the whole answer (or its first bytes for a stream)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".encode())
        got = b""
        while chunk := s.recv(65536):
            got += chunk
            if not read_all and b"\n{" in got:
                break
    return got


def wait_healthy(port: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Until the daemon on ``port`` answers /healthz with 200; fails if it exits or ``deadline`` passes."""
    while True:
        try:
            if b" 200 " in ask(port, "GET", "/healthz").split(b"\r\n", 1)[0]:
                return
        except OSError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "the daemon did not start"
        time.sleep(0.2)


def daemon_modules(timeout: float = 60.0) -> set[str]:
    """The modules of a daemon replaying the bundled recording after it answered every route, the stream
    and a reload."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "modules"
        env = {**os.environ, "HOME": tmp, "XDG_CONFIG_HOME": tmp, "XDG_STATE_HOME": tmp}
        proc = subprocess.Popen([sys.executable, "-c", HARNESS, str(out), "daemon", "--replay", "bundled", "--loop",
                                 "--listen", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        try:
            deadline = time.monotonic() + timeout
            wait_healthy(port, proc, deadline)
            for path in PATHS:
                ask(port, "GET", path)
            ask(port, "GET", "/api/v1/stream", read_all=False)
            ask(port, "POST", "/api/v1/reload")
            proc.send_signal(signal.SIGUSR1)
            while not out.exists():
                assert time.monotonic() < deadline, "the daemon wrote no module list"
                time.sleep(0.05)
            time.sleep(0.2)
            return set(out.read_text().split())
        finally:
            proc.terminate()
            proc.wait(20)
