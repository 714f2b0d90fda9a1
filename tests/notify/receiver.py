"""A real webhook receiver on 127.0.0.1 for tests: records every request and answers as scripted
(fail the first N requests, or fail until a moment, with a status and an optional Retry-After)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    answered: int
    at: float
    path: str = "/hook"

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Script:
    fail_first: int = 0
    fail_until: float = 0.0
    fail_status: int = 503
    retry_after: str | None = None
    #: Accept each request, then answer nothing for this long (a receiver that hangs).
    hang_s: float = 0.0


@dataclass
class Receiver:
    script: Script = field(default_factory=Script)
    requests: list[Received] = field(default_factory=list)
    #: Requests taken while hanging (never answered).
    hung: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if receiver.script.hang_s:
                    with receiver.lock:
                        receiver.hung.append(Received({k.lower(): v for k, v in self.headers.items()}, body, 0,
                                                      time.time(), self.path))
                    time.sleep(receiver.script.hang_s)
                    return
                with receiver.lock:
                    failing = (len(receiver.requests) < receiver.script.fail_first
                               or time.time() < receiver.script.fail_until)
                    status = receiver.script.fail_status if failing else 200
                    receiver.requests.append(Received({k.lower(): v for k, v in self.headers.items()}, body,
                                                      status, time.time(), self.path))
                self.send_response(status)
                if failing and receiver.script.retry_after is not None:
                    self.send_header("Retry-After", receiver.script.retry_after)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def delivered(self) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.answered == 200]

    def wait_for(self, n_delivered: int, timeout: float = 20.0) -> list[Received]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(self.delivered()) >= n_delivered:
                return self.delivered()
            time.sleep(0.05)
        raise AssertionError(f"{len(self.delivered())} of {n_delivered} notifications arrived in {timeout} s")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
