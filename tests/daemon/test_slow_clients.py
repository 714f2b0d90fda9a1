"""Many or slow connections against a real daemon process with a small fd limit: the API stays up, half-sent
heads are cut at the deadline, stalled streams give their slot back, and the log stays a few lines."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from daemon.incident import write_recording
from daemon.process import DaemonProcess


def write_config(tmp_path: Path, **daemon: object) -> Path:
    lines = ["[daemon]", 'listen = "127.0.0.1:0"', f'state_dir = "{tmp_path / "state"}"']
    lines += [f"{k} = {v!r}".replace("'", '"') for k, v in daemon.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def looping_recording(tmp_path: Path) -> Path:
    return write_recording(tmp_path / "incident.ndjson.gz", n=120)


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    yield held
    for s in held:
        s.close()


def half_heads(port: int, n: int, held: list[socket.socket]) -> None:
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        held.append(s)


@pytest.mark.serial  # bounds CPU share, wall time or RSS: measured alone, after the parallel part
def test_a_thousand_half_sent_heads_under_a_256_fd_limit_leave_healthz_and_metrics_up(
        tmp_path: Path, looping_recording: Path, sockets: list[socket.socket]) -> None:
    config = write_config(tmp_path, request_timeout="60s")  # the deadline is not what saves us here
    d = DaemonProcess(config, looping_recording, tmp_path / "log", fds=(256, 256),
                      extra=("--loop", "--speed", "5"))
    try:
        d.wait_healthy()  # the first snapshot is in: what follows is the half-sent heads' doing alone
        half_heads(d.port, 1000, sockets)
        started = time.monotonic()
        health = d.healthz(timeout=5)
        metrics = requests.get(d.url + "/metrics", timeout=5)
        took = time.monotonic() - started
    finally:
        assert d.stop() == 0
    log = d.log.read_text()
    assert (health.status_code, metrics.status_code) == (200, 200), (health.text, log[-3000:])
    assert took < 2.0
    assert "Traceback" not in log and len(log.splitlines()) < 20, log


def test_a_drip_fed_head_is_cut_at_the_request_timeout(tmp_path: Path, looping_recording: Path) -> None:
    config = write_config(tmp_path, request_timeout="1s")
    d = DaemonProcess(config, looping_recording, tmp_path / "log", extra=("--loop",))
    try:
        with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
            started, closed_after = time.monotonic(), None
            for byte in b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Drip: " + b"a" * 100:
                try:
                    s.sendall(bytes([byte]))
                    s.settimeout(0.2)
                    if s.recv(1024) == b"":
                        closed_after = time.monotonic() - started
                        break
                except TimeoutError:
                    continue
                except OSError:
                    closed_after = time.monotonic() - started
                    break
    finally:
        assert d.stop() == 0
    assert closed_after is not None and 0.9 < closed_after < 3.0, closed_after


def test_the_fd_soft_limit_is_raised_to_the_hard_limit_at_start(tmp_path: Path, looping_recording: Path) -> None:
    d = DaemonProcess(write_config(tmp_path), looping_recording, tmp_path / "log", fds=(256, 4096),
                      extra=("--loop",))
    try:
        limits = Path(f"/proc/{d.proc.pid}/limits").read_text()
    finally:
        assert d.stop() == 0
    line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
    assert line.split()[3:5] == ["4096", "4096"]


def test_stream_clients_are_capped_and_a_stalled_one_frees_its_slot(tmp_path: Path, looping_recording: Path,
                                                                      sockets: list[socket.socket]) -> None:
    config = write_config(tmp_path, max_stream_clients=2, request_timeout="1s")
    d = DaemonProcess(config, looping_recording, tmp_path / "log", extra=("--loop", "--speed", "0"))
    try:
        for _ in range(2):  # two clients that never read: their socket buffers fill, writes stall
            s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n\r\n")
            sockets.append(s)
        time.sleep(0.3)
        third = requests.get(d.url + "/api/v1/stream", stream=True, timeout=5)
        refused = third.status_code
        third.close()
        deadline, freed = time.monotonic() + 15, None
        while time.monotonic() < deadline and freed is None:
            r = requests.get(d.url + "/api/v1/stream", stream=True, timeout=5)
            if r.status_code == 200:
                freed = time.monotonic()
            r.close()
            time.sleep(0.2)
    finally:
        assert d.stop() == 0
    assert refused == 503
    assert freed is not None
