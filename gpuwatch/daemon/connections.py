"""Keeps the API up under many or slow connections, and the log quiet under junk requests.

* A request head must be complete within ``request_timeout`` of connecting (or of the previous response
  on a kept-alive connection); the same time closes an idle connection. aiohttp's keep-alive timer does
  both: it runs from connect, is not extended by drip-fed bytes, and closes a connection waiting for a head.
* At most ``max_connections`` connections, and never more than the file descriptors allow. A new
  connection beyond the cap evicts the oldest one not being served (a slow or idle client), so half-sent
  heads cannot lock out ``/healthz``; only when every connection is mid-request is the new one refused
  with 503.
* The file descriptor soft limit is raised to the hard limit at start.
* Malformed requests and accept errors log one line without a traceback, at most once a minute per kind.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

log = logging.getLogger(__name__)

#: Connections the kernel may queue for us; asyncio accepts up to this many in one go, before the
#: connections they evict have closed, so the fds they need must be kept free too.
BACKLOG = 128
#: File descriptors kept free for everything that is not a client connection (outbox, logs, DCGM), plus
#: one accept burst.
FD_RESERVE = 64 + BACKLOG
#: How many fds we ask for at most when raising the soft limit (the hard limit may be "unlimited").
FD_WANTED = 65536
REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n"
           b"Connection: close\r\n\r\ntoo many connections\n")


def raise_fd_limit(wanted: int = FD_WANTED) -> int:
    """Raise the soft RLIMIT_NOFILE towards the hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, exc)
    return soft


def connection_cap(configured: int, fd_soft_limit: int) -> int:
    """The connection cap: the configured one, lowered so client sockets can never use up the fds."""
    return max(1, min(configured, fd_soft_limit - FD_RESERVE))


class RateLimited:
    """At most one line per ``key`` each ``every_s`` seconds; the next line says how many were held back."""

    def __init__(self, every_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def allow(self, key: str) -> tuple[bool, int]:
        """(may log now, lines held back since the last one)."""
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.every_s:
            self._held[key] = self._held.get(key, 0) + 1
            return False, 0
        if len(self._last) > 1000:  # keys are few; never let odd input grow this
            self._last.clear()
        self._last[key] = now
        return True, self._held.pop(key, 0)


class RequestLog(logging.LoggerAdapter):
    """aiohttp's server logger, tamed: a malformed request is the client's fault, so one line at INFO
    with no traceback; an error in our own handler keeps its traceback but is rate-limited too."""

    def __init__(self, limiter: RateLimited | None = None) -> None:
        super().__init__(logging.getLogger("gpuwatch.daemon.http"), {})
        self.limiter = limiter or RateLimited()

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info")
        if isinstance(exc, HttpProcessingError):
            ok, held = self.limiter.allow(f"bad:{type(exc).__name__}")
            if ok:
                reason = str(exc.message).strip().splitlines()[0] if exc.message else type(exc).__name__
                more = f" ({held} more like it not logged)" if held else ""
                self.logger.info("malformed request (HTTP %d: %s)%s", exc.code, reason[:120], more)
            return
        if level < logging.WARNING:
            self.logger.log(level, msg, *args, **{k: v for k, v in kwargs.items() if k != "exc_info"})
            return
        ok, held = self.limiter.allow(f"err:{msg}:{type(exc).__name__}")
        if ok:
            if held:
                self.logger.error("%d more request errors were not logged", held)
            self.logger.log(level, msg, *args, **kwargs)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, limiter: RateLimited | None = None) -> None:
    """Accept failures (out of fds, ...) and other loop errors: one line a minute each, no traceback flood."""
    limiter = limiter or RateLimited()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message", "event loop error"))
        ok, held = limiter.allow(f"{message}:{type(exc).__name__}")
        if ok:
            more = f" ({held} more like it not logged)" if held else ""
            log.error("%s: %s%s", message, exc if exc is not None else "", more)

    loop.set_exception_handler(handler)


class ConnectionGuard:
    """Caps connections by evicting idle ones; its middleware tells which connections are mid-request."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.evicted = 0
        self.refused = 0
        self._busy: set[object] = set()

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        transport = request.transport
        self._busy.add(transport)
        try:
            return await handler(request)
        finally:
            self._busy.discard(transport)

    def factory(self, server: web.Server) -> Callable[[], asyncio.Protocol]:
        def make() -> asyncio.Protocol:
            # Connections already closing (no transport) hold their fds only until the loop's next turn:
            # they do not count. Within one accept burst every idle connection may have been evicted for
            # the burst's earlier arrivals; the later ones are still taken (FD_RESERVE holds a burst), not
            # refused: that refusal is what could lock /healthz out behind a flood of half-sent heads.
            live = [c for c in server.connections if c.transport is not None]
            if len(live) >= self.limit:
                idle = [c for c in live if c.transport not in self._busy]
                if not idle:
                    self.refused += 1
                    return _Refuse()
                for c in idle[:len(live) - self.limit + 1]:  # the oldest idle or half-sent ones make room
                    c.force_close()
                    self.evicted += 1
            return server()

        return make


class _Refuse(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(REFUSAL)
        transport.close()


class GuardedSite(web.TCPSite):
    """A TCP site whose connections go through a :class:`ConnectionGuard`."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard: ConnectionGuard) -> None:
        super().__init__(runner, host, port, reuse_address=True, backlog=BACKLOG)
        self.guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self.guard.factory(server), self._host, self._port,
                                                backlog=self._backlog, reuse_address=True)
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port
