"""Hostile HTTP against a real daemon through raw sockets: every method on every route, bad header bytes,
malformed requests. Nothing may be read without the token in remote mode, and no request may cost a
traceback in the log."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.conftest import RunningDaemon
from gpuwatch.config import Config, DaemonConfig

TOKEN = "s3cret-token-0123456789"
ROUTES = ("/metrics", "/healthz", "/api/v1/snapshot", "/api/v1/stream", "/api/v1/alerts", "/api/v1/diagnosis",
          "/api/v1/history", "/api/v1/reload", "/no/such/route")
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND")


def raw_request(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send ``data`` as is and return the status line plus headers (never the body of a stream)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    return got


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def request(port: int, method: str, path: str, headers: dict[str, str] | None = None) -> int:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", "Content-Length: 0"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return status_of(raw_request(port, ("\r\n".join(lines) + "\r\n\r\n").encode()))


@pytest.fixture
def remote(tmp_path: Path, recording: Path) -> Iterator[RunningDaemon]:
    """Remote mode: listening on every address, so reads need the token."""
    token = tmp_path / "token"
    token.write_text(TOKEN)
    config = Config(daemon=DaemonConfig(listen="0.0.0.0:0", allow_remote=True, token_file=str(token),
                                        state_dir=str(tmp_path / "s")))
    d = RunningDaemon(config, recording)
    yield d
    d.stop()


def test_in_remote_mode_every_method_on_every_route_but_healthz_needs_the_token(remote: RunningDaemon) -> None:
    port = remote.daemon.bound_port
    assert port is not None
    open_doors = {(m, p): s for m in METHODS for p in ROUTES if p != "/healthz"
                  if (s := request(port, m, p)) != 401}
    assert open_doors == {}
    assert request(port, "GET", "/healthz") == 200
    assert request(port, "HEAD", "/healthz") == 200


def test_the_stream_answers_head_with_405_even_with_the_token(remote: RunningDaemon) -> None:
    port = remote.daemon.bound_port
    assert port is not None
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert request(port, "HEAD", "/api/v1/stream", bearer) == 405
    assert request(port, "HEAD", "/metrics", bearer) == 200


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_bearer_scheme_is_case_insensitive(remote: RunningDaemon, scheme: str) -> None:
    port = remote.daemon.bound_port
    assert port is not None
    assert request(port, "GET", "/api/v1/alerts", {"Authorization": f"{scheme} {TOKEN}"}) == 200


def test_non_utf8_bytes_in_authorization_are_refused_with_401_and_no_traceback(
        remote: RunningDaemon, caplog: pytest.LogCaptureFixture) -> None:
    port = remote.daemon.bound_port
    assert port is not None
    head = b"GET /api/v1/alerts HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer \xff\xfe\xc3\r\n\r\n"
    with caplog.at_level(logging.DEBUG):
        status = status_of(raw_request(port, head))
    assert status == 401
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2\r\n\r\n",  # a digit to str.isdigit, not to int
    b"POST /api/v1/reload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nBad Header Line\r\n\r\n",
    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n",
    b"\x00\x01\x02\x03\r\n\r\n",
]


def test_malformed_requests_get_400_and_log_no_traceback(running: RunningDaemon,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    port = running.daemon.bound_port
    assert port is not None
    with caplog.at_level(logging.DEBUG):
        statuses = [status_of(raw_request(port, data)) for data in MALFORMED]
    assert all(400 <= s < 500 for s in statuses), statuses
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info]
    assert tracebacks == []


@pytest.mark.parametrize("window", ["nan", "inf", "-5", "0"])
def test_a_diagnosis_window_that_is_not_a_positive_number_is_a_400_in_valid_json(running: RunningDaemon,
                                                                                   window: str) -> None:
    port = running.daemon.bound_port
    assert port is not None
    head = f"GET /api/v1/diagnosis?window={window} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(head)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    status, body = status_of(got), got.split(b"\r\n\r\n", 1)[1]
    assert status == 400 and "window" in json.loads(body)["error"]
