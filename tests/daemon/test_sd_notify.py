"""The systemd notify protocol on a real unix datagram socket, in-process and from a real daemon process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.incident import write_recording, write_rules
from gpuwatch.daemon.sd_notify import SystemdNotifier


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify.sock"))
    sock.settimeout(10)
    yield sock
    sock.close()


def messages(sock: socket.socket, until: str, timeout: float = 20.0) -> list[str]:
    """Datagrams received until one contains ``until``."""
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out.append(sock.recv(4096).decode())
        if until in out[-1]:
            return out
    raise AssertionError(f"no {until} in {out}")


@pytest.mark.parametrize(("call", "expected"), [
    ("ready", "READY=1"), ("watchdog", "WATCHDOG=1"), ("stopping", "STOPPING=1"), ("reloading", "RELOADING=1"),
])
def test_each_state_is_one_datagram_on_the_socket(notify_socket: socket.socket, call: str, expected: str) -> None:
    sd = SystemdNotifier({"NOTIFY_SOCKET": notify_socket.getsockname()})
    assert getattr(sd, call)() is True
    assert expected in notify_socket.recv(4096).decode().splitlines()


def test_the_abstract_namespace_form_works() -> None:
    name = f"gpuwatch-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert SystemdNotifier({"NOTIFY_SOCKET": "@" + name}).ready("up")
        assert sock.recv(4096).decode().splitlines()[0] == "READY=1"


@pytest.mark.parametrize(("env", "interval"), [
    ({}, None),
    ({"WATCHDOG_USEC": "20000000"}, 10.0),  # ping at half of WatchdogSec
    ({"WATCHDOG_USEC": "20000000", "WATCHDOG_PID": "1"}, None),  # armed for another process
    ({"WATCHDOG_USEC": "20000000", "WATCHDOG_PID": str(os.getpid())}, 10.0),
    ({"WATCHDOG_USEC": "nonsense"}, None),
])
def test_watchdog_interval_follows_systemds_variables(env: dict[str, str], interval: float | None) -> None:
    assert SystemdNotifier(env).watchdog_interval() == interval


def test_without_notify_socket_every_call_is_a_quiet_no_op() -> None:
    sd = SystemdNotifier({})
    assert not sd.enabled and sd.ready() is False and sd.watchdog() is False


def test_a_real_daemon_reports_ready_pings_the_watchdog_reloads_on_sighup_and_stops_on_sigterm(
        tmp_path: Path, notify_socket: socket.socket) -> None:
    rules = write_rules(tmp_path / "rules.yml")
    config = tmp_path / "config.toml"
    config.write_text(f'[alerts]\nrule_paths = ["{rules}"]\n[daemon]\nlisten = "127.0.0.1:0"\n'
                      f'state_dir = "{tmp_path / "state"}"\n')
    recording = write_recording(tmp_path / "r.ndjson.gz", n=50)
    env = {**os.environ, "NOTIFY_SOCKET": notify_socket.getsockname(), "WATCHDOG_USEC": "400000"}
    env.pop("WATCHDOG_PID", None)
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--config", str(config), "--replay",
                             str(recording), "--speed", "5", "--loop"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert any(m.startswith("READY=1") for m in messages(notify_socket, "READY=1"))
        assert messages(notify_socket, "WATCHDOG=1")
        rules.write_text("groups: [{name: broken, rules: [{alert: X, condition: {threshold: {metric: nope}}}]}]")
        proc.send_signal(signal.SIGHUP)
        failed = messages(notify_socket, "READY=1")
        assert any("RELOADING=1" in m for m in failed) and "reload failed" in failed[-1]
        write_rules(rules)
        proc.send_signal(signal.SIGHUP)
        assert "reloaded: 2 rule(s)" in messages(notify_socket, "READY=1")[-1]
        proc.send_signal(signal.SIGTERM)
        assert messages(notify_socket, "STOPPING=1")
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
        stderr = proc.communicate()[1]
    assert "reload failed, keeping the running config and rules" in stderr and "missing 'value'" in stderr
    assert "Traceback" not in stderr
