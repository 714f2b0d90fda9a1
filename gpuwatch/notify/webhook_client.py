"""One webhook POST with the standard library's ``urllib.request``, on a daemon thread of its own, awaited
from the deliverer's event loop.

Why a thread per attempt and not a pool: an attempt the daemon abandons at stop (a receiver that accepts and
never answers) must not hold the process at exit, and a pool's workers are joined there. The thread only
talks to the receiver; what the answer means for the outbox is decided on the event loop, so an abandoned
attempt marks nothing. Redirects are never followed (the signed headers would go wherever they point), no
proxy from the environment is used, and at most ``max_bytes`` of the answer are read (only its status
counts). https receivers are verified against the system's CAs with the standard library's ``ssl``, which
the daemon holds anyway (prometheus_client's exposition module imports it).
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any

#: Bytes read from the socket at a time while reading (and dropping) an answer's body.
READ_CHUNK = 16 * 1024


@dataclass(frozen=True)
class Answer:
    status: int
    retry_after: str | None
    #: The body was longer than ``max_bytes``: the rest was not read (the connection is closed).
    cut: bool = False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx comes back as an HTTPError with its status


def describe(exc: BaseException) -> str:
    """``Type: message`` of what went wrong, unwrapping urllib's URLError to the socket's own error."""
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError) \
            and isinstance(exc.reason, BaseException):
        exc = exc.reason
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class WebhookClient:
    """POSTs for the deliverer; one client serves every receiver."""

    def __init__(self) -> None:
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())

    def _post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float, max_bytes: int) -> Answer:
        deadline = time.monotonic() + timeout
        request = urllib.request.Request(url, data=body, headers={"User-Agent": "gpuwatch", **headers}, method="POST")
        try:
            response = self._opener.open(request, timeout=timeout)
        except urllib.error.HTTPError as exc:  # a status that is not 2xx: still an answer
            response = exc
        with response:
            status, answer_headers = int(response.status or 0), response.headers
            seen = 0
            while time.monotonic() < deadline:
                chunk = response.read1(READ_CHUNK) if hasattr(response, "read1") else response.read(READ_CHUNK)
                if not chunk:
                    break
                seen += len(chunk)
                if seen > max_bytes:
                    return Answer(status, _header(answer_headers, "Retry-After"), cut=True)
            return Answer(status, _header(answer_headers, "Retry-After"))

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float,
                   max_bytes: int) -> Answer:
        """The receiver's answer within ``timeout`` seconds in all (asyncio.TimeoutError past it), or the
        error that stopped it (OSError, urllib's URLError)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Answer] = loop.create_future()

        def settle(result: Answer | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]

        def attempt() -> None:
            try:
                result: Answer | None = self._post(url, body, headers, timeout, max_bytes)
                error: BaseException | None = None
            except Exception as exc:
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(settle, result, error)
            except RuntimeError:  # the loop closed: the attempt was abandoned
                pass

        threading.Thread(target=attempt, name="gpuwatch-webhook", daemon=True).start()
        return await asyncio.wait_for(future, timeout)


def _header(headers: Message | Any, name: str) -> str | None:
    value = headers.get(name) if headers is not None else None
    return None if value is None else str(value)
