"""A requests adapter whose scrapes end at a deadline, counted from connect to the last byte.

requests' timeouts are per socket read: a server that drips its *headers* one byte at a time never trips
them, and the body-reading loop that checks the whole-scrape deadline never starts. This adapter remembers
the sockets of the connections it opens, so a timer can shut them down at the deadline, wherever the
scrape is (connecting, headers, body); the blocked read then returns at once.
"""

from __future__ import annotations

import logging
import socket
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

# urllib3 logs an exporter's malformed (or cut-off) headers as a warning with a traceback, once per
# scrape; the scrape's own error already says what went wrong, in one line.
logging.getLogger("urllib3.connection").setLevel(logging.ERROR)


class DeadlineAdapter(HTTPAdapter):
    def __init__(self, **kwargs: Any) -> None:
        self._open: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        adapter = self

        class Connection(HTTPConnection):
            def connect(self) -> None:
                adapter._opened(self)  # before connecting: a connect that hangs is cut off too
                super().connect()

        class TlsConnection(HTTPSConnection):
            def connect(self) -> None:
                adapter._opened(self)
                super().connect()

        class Pool(HTTPConnectionPool):
            ConnectionCls = Connection

        class TlsPool(HTTPSConnectionPool):
            ConnectionCls = TlsConnection

        self.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": TlsPool}

    def _opened(self, conn: HTTPConnection) -> None:
        with self._lock:
            self._open.add(conn)

    def cut(self) -> None:
        """Shut down every socket this adapter has open: whatever read is blocked on one returns now."""
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            sock: socket.socket | None = getattr(conn, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed

    @contextmanager
    def deadline(self, seconds: float) -> Iterator[threading.Event]:
        """Cut this adapter's connections if the block is still running after ``seconds``; the event
        says whether it was cut."""
        fired = threading.Event()

        def fire() -> None:
            fired.set()
            self.cut()

        timer = threading.Timer(seconds, fire)
        timer.daemon = True
        timer.start()
        try:
            yield fired
        finally:
            timer.cancel()
