"""Keeps the API up under many or slow connections, and the log quiet under junk requests.

* A request head must be complete within ``request_timeout`` of connecting (or of the previous response
  on a kept-alive connection); the same time closes an idle connection. The guard's reaper thread keeps
  each waiting connection's deadline: it runs from connect, is not extended by drip-fed bytes, and cuts
  (``shutdown``) a connection still waiting for its head. Every read and write has the same timeout.
* At most ``max_connections`` connections, and never more than the file descriptors allow. A new
  connection beyond the cap evicts the oldest one not being served (a slow or idle client), so half-sent
  heads cannot lock out ``/healthz``; only when every connection is mid-request is the new one refused
  with 503.
* The file descriptor soft limit is raised to the hard limit at start.
* Malformed requests and accept errors log one line without a traceback, at most once a minute per kind
  (:mod:`gpuwatch.daemon.server` says them through :class:`RateLimited`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: Connections the kernel may queue for us; the accept thread may take this many before the threads of
#: the connections they evict have closed them, so the fds they need must be kept free too.
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


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, limiter: RateLimited | None = None) -> None:
    """Errors the event loop reports (a task that failed unawaited, ...): one line a minute each, no traceback
    flood. Accept failures are the server's, logged the same way (:meth:`Server.get_request`)."""
    limiter = limiter or RateLimited()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message", "event loop error"))
        ok, held = limiter.allow(f"{message}:{type(exc).__name__}")
        if ok:
            more = f" ({held} more like it not logged)" if held else ""
            log.error("%s: %s%s", message, exc if exc is not None else "", more)

    loop.set_exception_handler(handler)


@dataclass
class _Connection:
    sock: socket.socket
    #: When its head must be complete (None while a request is being served).
    deadline: float | None
    #: Shut down, its thread not yet gone: it no longer counts against the cap.
    cut: bool = False

    def cut_now(self) -> None:
        """Wake the thread blocked on this connection (its read returns nothing) and let it close it."""
        self.cut = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class ConnectionGuard:
    """Caps connections by evicting idle ones and cuts heads past their deadline. The server calls
    :meth:`admit` on its accept thread, :meth:`busy`/:meth:`idle` around each request and :meth:`release`
    before it closes a socket; a socket is shut down only while it is registered, under the lock, so a
    descriptor number the kernel has given to a newer connection is never touched."""

    def __init__(self, limit: int, request_timeout: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.request_timeout = request_timeout
        self.clock = clock
        self.evicted = 0
        self.refused = 0
        #: Connections cut for a head not complete in time.
        self.timed_out = 0
        self._conns: dict[socket.socket, _Connection] = {}  # oldest first
        self._cond = threading.Condition()
        self._stopping = False
        self._reaper: threading.Thread | None = None

    def start(self) -> None:
        self._reaper = threading.Thread(target=self._reap, name="gpuwatch-http-reaper", daemon=True)
        self._reaper.start()

    def admit(self, sock: socket.socket) -> bool:
        """Register a new connection, evicting the oldest idle ones at the cap; False: refuse it."""
        with self._cond:
            # Connections already cut hold their fds only until their thread wakes: they do not count.
            # Within one accept burst every idle connection may have been evicted for the burst's earlier
            # arrivals; the later ones are still taken (FD_RESERVE holds a burst), not refused: that
            # refusal is what could lock /healthz out behind a flood of half-sent heads.
            live = [c for c in self._conns.values() if not c.cut]
            if len(live) >= self.limit:
                idle = [c for c in live if c.deadline is not None]
                if not idle:
                    self.refused += 1
                    return False
                for c in idle[:len(live) - self.limit + 1]:  # the oldest idle or half-sent ones make room
                    c.cut_now()
                    self.evicted += 1
            self._conns[sock] = _Connection(sock, self.clock() + self.request_timeout)
            self._cond.notify()
        return True

    def busy(self, sock: socket.socket) -> None:
        """Its head is in: no deadline while it is served (reads and writes have their own timeout)."""
        with self._cond:
            c = self._conns.get(sock)
            if c is not None:
                c.deadline = None

    def idle(self, sock: socket.socket) -> None:
        """Answered: the next head (or the close of an idle keep-alive) is due within the timeout."""
        with self._cond:
            c = self._conns.get(sock)
            if c is not None:
                c.deadline = self.clock() + self.request_timeout
                self._cond.notify()

    def release(self, sock: socket.socket) -> None:
        with self._cond:
            self._conns.pop(sock, None)
            self._cond.notify_all()

    @property
    def connections(self) -> int:
        with self._cond:
            return len(self._conns)

    def _reap(self) -> None:
        with self._cond:
            while not self._stopping:
                now, due = self.clock(), None
                for c in self._conns.values():
                    if c.deadline is None or c.cut:
                        continue
                    if c.deadline <= now:
                        c.cut_now()
                        self.timed_out += 1
                    elif due is None or c.deadline < due:
                        due = c.deadline
                self._cond.wait(None if due is None else due - now)

    def drain(self, grace_s: float) -> None:
        """At stop: cut idle connections at once, give requests in flight ``grace_s`` to finish, then cut
        the rest and stop the reaper."""
        deadline = self.clock() + grace_s
        with self._cond:
            for c in self._conns.values():
                if c.deadline is not None:
                    c.cut_now()
            while any(not c.cut for c in self._conns.values()) and self.clock() < deadline:
                self._cond.wait(max(0.0, min(0.1, deadline - self.clock())))
                for c in self._conns.values():
                    if c.deadline is not None and not c.cut:
                        c.cut_now()
            for c in self._conns.values():
                if not c.cut:
                    c.cut_now()
            self._stopping = True
            self._cond.notify_all()
