"""A stand-in dcgm-exporter: a real HTTP server on 127.0.0.1 that serves a body, or misbehaves on request.

Tests switch what it does with :meth:`FakeExporter.behave`; it can be stopped and started again on the same
port, so a source can watch its exporter die and come back.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@dataclass
class Behaviour:
    """What the next requests get. ``mode``: "body" (status + body), "hang" (never answer), "drip" (one byte
    every ``drip_s``), "drip-headers" (the same, before the headers end), "redirect-loop" (302 to itself),
    "endless" (an unbounded body), "reset" (half the body, then the socket closes)."""

    mode: str = "body"
    body: bytes = b""
    status: int = 200
    gzip: bool = False
    #: With ``gzip``: False declares gzip but sends the body as is (a corrupt encoding).
    compress: bool = True
    drip_s: float = 0.05
    declared_length: int | None = None
    charset: str = "utf-8"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        b = self.server.behaviour
        self.server.requests += 1
        try:
            getattr(self, f"_{b.mode.replace('-', '_')}")(b)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def _body(self, b: Behaviour) -> None:
        body = gzip.compress(b.body) if b.gzip and b.compress else b.body
        self.send_response(b.status)
        self.send_header("Content-Type", f"text/plain; version=0.0.4; charset={b.charset}")
        if b.gzip:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(b.declared_length if b.declared_length is not None else len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _hang(self, b: Behaviour) -> None:
        self.server.release.wait(30)

    def _drip(self, b: Behaviour) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(b.body)))
        self.end_headers()
        for i in range(len(b.body)):
            if self.server.release.wait(b.drip_s):
                return
            self.wfile.write(b.body[i:i + 1])
            self.wfile.flush()

    def _drip_headers(self, b: Behaviour) -> None:
        """Headers one byte every ``drip_s``, for ever (no read timeout ever trips)."""
        head = b"HTTP/1.1 200 OK\r\n" + b"X-Padding: " + b"a" * 100_000
        for i in range(len(head)):
            if self.server.release.wait(b.drip_s):
                return
            self.wfile.write(head[i:i + 1])
            self.wfile.flush()

    def _redirect_loop(self, b: Behaviour) -> None:
        self.send_response(302)
        self.send_header("Location", f"/metrics?hop={self.server.requests}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _endless(self, b: Behaviour) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        line = b'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-x"} 40\n' * 1024
        chunk = f"{len(line):x}\r\n".encode() + line + b"\r\n"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not self.server.release.is_set():
            self.wfile.write(chunk)

    def _reset(self, b: Behaviour) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(b.body)))
        self.end_headers()
        self.wfile.write(b.body[: len(b.body) // 2])
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)  # the exporter dies mid-page

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.behaviour = Behaviour()
        self.release = threading.Event()
        self.requests = 0
        self.connections: set[socket.socket] = set()

    def process_request(self, request, client_address):  # type: ignore[no-untyped-def]
        self.connections.add(request)
        super().process_request(request, client_address)

    def close_connections(self) -> None:
        """A dead exporter drops its keep-alive connections as well as its listening socket."""
        for conn in list(self.connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class FakeExporter:
    """The server and its switches; ``url`` stays valid across stop/start."""

    def __init__(self) -> None:
        self._server: _Server | None = None
        self.port = 0
        self.behaviour = Behaviour()
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    @property
    def requests(self) -> int:
        return self._server.requests if self._server else 0

    def behave(self, **kwargs: object) -> None:
        self.behaviour = Behaviour(**kwargs)  # type: ignore[arg-type]
        if self._server:
            self._server.behaviour = self.behaviour

    def serve(self, body: bytes, **kwargs: object) -> None:
        self.behave(mode="body", body=body, **kwargs)

    def start(self) -> None:
        self._server = _Server(self.port)
        self._server.behaviour = self.behaviour
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        if self._server:
            self._server.release.set()
            self._server.shutdown()
            self._server.server_close()
            self._server.close_connections()
            self._server = None


def unused_port() -> int:
    """A port nothing listens on (bound, then released): connecting to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
