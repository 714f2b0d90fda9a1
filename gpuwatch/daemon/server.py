"""The daemon's HTTP/1.1 server, on the standard library: one daemon thread per connection
(``ThreadingHTTPServer``) and routes that are plain functions from a :class:`Request` to a :class:`Response`.

Why not an asynchronous framework: the daemon runs beside the GPU job it watches, and aiohttp alone was
12 MiB of its RSS (replaying the bundled recording: 48.9 MiB with it, 36.9 without); the few connections a
daemon has (a Prometheus scrape, a handful of dashboards) need no event loop. Handlers run on the
connection's thread, so everything they read is immutable (Snapshots, alert lists replaced whole) or guarded
by its owner's lock (the outbox, the stream hub, the efficiency store).

Keep-alive, HEAD (a GET route's headers without its body), 404 and 405 are answered here; a streamed body
(:attr:`Response.chunks`) goes out chunked, each chunk within the socket timeout, so a client that stops
reading is dropped rather than holding a thread forever. Connection limits, the head deadline and the
quiet log of malformed requests are :mod:`gpuwatch.daemon.connections`.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import socket
import socketserver
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from gpuwatch.daemon.connections import BACKLOG, REFUSAL, ConnectionGuard, RateLimited

log = logging.getLogger("gpuwatch.daemon.http")

#: Largest request body taken (only POST /api/v1/reload takes one, and ignores it).
MAX_BODY_BYTES = 64 * 1024


@dataclass(frozen=True)
class Request:
    method: str
    #: The path, percent-decoded, without the query.
    path: str
    #: The first value of each query parameter.
    query: Mapping[str, str]
    headers: Message
    body: bytes = b""


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    #: A streamed body (NDJSON): written chunk by chunk as the iterator yields.
    chunks: Iterator[bytes] | None = None
    #: Called once the response is written or abandoned (a stream's subscription given back).
    on_close: Callable[[], None] | None = None


def json_response(data: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(data, separators=(",", ":")).encode(), "application/json")


Handler = Callable[[Request], Response]
#: Runs before routing; a Response refuses the request (the token check).
Guard = Callable[[Request], "Response | None"]
Hook = Callable[[], Awaitable[None]]


class App:
    """Routes by path and method, guards that run before them (even for 404 and 405), and the hooks the
    runner awaits on its event loop at start and after serving stopped."""

    def __init__(self) -> None:
        self.routes: dict[str, dict[str, Handler]] = {}
        self.no_head: set[str] = set()
        self.guards: list[Guard] = []
        self.on_startup: list[Hook] = []
        self.on_cleanup: list[Hook] = []

    def get(self, path: str, handler: Handler, head: bool = True) -> None:
        """A GET route; HEAD answers its headers unless ``head`` is False (a stream would start)."""
        self.routes.setdefault(path, {})["GET"] = handler
        if not head:
            self.no_head.add(path)

    def post(self, path: str, handler: Handler) -> None:
        self.routes.setdefault(path, {})["POST"] = handler

    def respond(self, request: Request) -> Response:
        for guard in self.guards:
            denied = guard(request)
            if denied is not None:
                return denied
        methods = self.routes.get(request.path)
        if methods is None:
            return Response(404, b"404: Not Found")
        method = "GET" if request.method == "HEAD" and request.path not in self.no_head else request.method
        handler = methods.get(method)
        if handler is None:
            allowed = sorted({*methods, *(("HEAD",) if "GET" in methods and request.path not in self.no_head else ())})
            return Response(405, b"405: Method Not Allowed", headers={"Allow": ", ".join(allowed)})
        return handler(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpuwatch"
    #: What a refusal of a request line that names no version is written as (the base class's HTTP/0.9 has
    #: no status line).
    default_request_version = "HTTP/1.1"
    sys_version = ""
    server: Server

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)  # every read and write; the head has a deadline
        # The head and the body go out as two writes: without this the second waits for the peer's ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle_one_request(self) -> None:
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if not self.raw_requestline:
                self.close_connection = True
                return
            if len(self.raw_requestline) > 65536:
                self.requestline, self.request_version, self.command = "", "", ""
                self.send_error(414, "request line too long")
                return
            parsed = self.parse_request()
            if parsed:
                problem = self._bad_head()
                if problem:
                    self.send_error(400, problem)
                    parsed = False
            if not parsed:
                return
            self.server.guard.busy(self.connection)
            try:
                self._serve()
            finally:
                self.server.guard.idle(self.connection)
            if self.server.stopping:
                self.close_connection = True
        except OSError:  # a timeout, a reset, or the guard cut the connection
            self.close_connection = True

    def _bad_head(self) -> str | None:
        """What parse_request lets through but a strict server refuses: a request line of two words (HTTP/0.9),
        header lines without a colon, a Content-Length that is not a number, a chunked request body."""
        if len(self.requestline.split()) != 3:
            return "a request line is METHOD PATH HTTP/1.x"
        if self.headers.defects:
            return "malformed header line"
        length = self.headers.get("Content-Length")
        if length is not None and not (length.strip().isascii() and length.strip().isdigit()):  # not "²"
            return "Content-Length is not a number"
        if length is not None and len(length.strip().lstrip("0")) > len(str(MAX_BODY_BYTES)):
            return "Content-Length is too large"  # (and int() refuses over 4 300 digits)
        if self.headers.get("Transfer-Encoding"):
            return "a request body must have a Content-Length"
        return None

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Only a malformed request gets here (parse_request's refusals and :meth:`_bad_head`'s): the
        client's fault, so a 4xx and one quiet line at INFO, at most once a minute per status."""
        code = 400 if code >= 500 else code
        ok, held = self.server.limiter.allow(f"bad:{code}")
        if ok:
            more = f" ({held} more like it not logged)" if held else ""
            reason = message.strip().splitlines()[0][:120] if message and message.strip() else str(code)
            log.info("malformed request (HTTP %d: %s)%s", code, reason, more)
        self.close_connection = True
        super().send_error(code, message, explain)

    def log_message(self, format: str, *args: Any) -> None:
        """No access log (and errors are logged where they happen)."""

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._write(Response(413, b"request body too large\n"))
            return
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        request = Request(self.command, unquote(url.path), query, self.headers, body)
        try:
            response = self.server.app.respond(request)
        except Exception as exc:  # a bug of ours: the traceback once a minute, a 500 every time
            ok, held = self.server.limiter.allow(f"err:{request.path}:{type(exc).__name__}")
            if ok:
                if held:
                    log.error("%d more request errors were not logged", held)
                log.exception("error handling %s %s", request.method, request.path)
            response = Response(500, b"500 Internal Server Error")
        try:
            self._write(response)
        finally:
            if response.on_close is not None:
                response.on_close()

    def _write(self, r: Response) -> None:
        head = self.command == "HEAD"
        self.send_response(r.status)
        self.send_header("Content-Type", r.content_type)
        for name, value in r.headers.items():
            self.send_header(name, value)
        if r.chunks is None:
            self.send_header("Content-Length", str(len(r.body)))
            self.end_headers()
            if not head:
                self.wfile.write(r.body)
            return
        chunked = self.request_version == "HTTP/1.1"
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:  # HTTP/1.0: the body ends where the connection does
            self.close_connection = True
        self.end_headers()
        if head:
            return
        for chunk in r.chunks:
            if chunk:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")


class Server(ThreadingHTTPServer):
    """Binds at construction (IPv4 or IPv6, as the host says); :meth:`start` serves on a thread."""

    daemon_threads = True
    request_queue_size = BACKLOG

    def __init__(self, host: str, port: int, app: App, guard: ConnectionGuard, request_timeout: float,
                 limiter: RateLimited | None = None) -> None:
        # An ASCII host as bytes: a str would load the IDNA codec (and stringprep) just to encode it.
        name = host.encode() if host.isascii() else host
        self.address_family = socket.getaddrinfo(name or None, port, type=socket.SOCK_STREAM)[0][0]
        self.app = app
        self.guard = guard
        self.request_timeout = request_timeout
        self.limiter = limiter or RateLimited()
        self.stopping = False
        self._thread: threading.Thread | None = None
        #: Written once by :meth:`close` to end the accept loop's wait (its only wake-up besides a client).
        self._wake_r, self._wake_w = os.pipe()
        super().__init__((host, port), _Handler)

    def server_bind(self) -> None:
        """Without HTTPServer's reverse DNS lookup of the host (it can take seconds)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> None:
        self.guard.start()
        self._thread = threading.Thread(target=self._accept_loop, name="gpuwatch-http", daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        """Accept until :meth:`close`. ``serve_forever`` wakes every half second to look for a shutdown (the
        accept thread's 0.11 ms of CPU a second on the H200, between scrapes): this loop sleeps until a
        client connects or ``close`` writes to its pipe."""
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self.stopping:
                for key, _ in selector.select():
                    if key.fileobj is self and not self.stopping:
                        self._handle_request_noblock()  # type: ignore[attr-defined]  # serve_forever's own step

    def get_request(self) -> tuple[socket.socket, Any]:
        """accept(), and when it fails (out of fds) one line a minute and a short pause, not a spin."""
        try:
            return super().get_request()
        except OSError as exc:
            ok, held = self.limiter.allow(f"accept:{type(exc).__name__}")
            if ok:
                log.error("cannot accept a connection: %s%s", exc, f" ({held} more like it not logged)" if held else "")
            time.sleep(0.05)
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        """On the accept thread: make room under the connection cap, or refuse with 503."""
        if not self.guard.admit(request):
            try:
                request.sendall(REFUSAL)
            except OSError:
                pass
            request.close()
            return
        try:
            super().process_request(request, client_address)
        except RuntimeError:  # no thread to be had: the connection goes, the daemon stays
            self.shutdown_request(request)

    def shutdown_request(self, request: Any) -> None:
        self.guard.release(request)  # before the close: the guard never shuts a reused descriptor down
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        ok, _ = self.limiter.allow("connection-error")
        if ok:
            log.exception("error on a connection")

    def close(self, grace_s: float) -> None:
        """Stop accepting, close the listening socket, let responses in flight finish (up to ``grace_s``;
        streams end when the hub closes), then cut what is left."""
        if self.stopping:
            return
        self.stopping = True
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join()
        self.server_close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self.guard.drain(grace_s)


def bind(host: str, port: int, app: App, guard: ConnectionGuard, request_timeout: float) -> Server:
    """The server, bound (OSError when the address is taken or not ours); nothing is served before start."""
    return Server(host, port, app, guard, request_timeout)
