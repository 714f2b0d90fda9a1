"""A feed from one or more gpuwatch daemons: the fleet view.

Per daemon, one thread reads ``GET /api/v1/stream`` (NDJSON, one snapshot per line), after filling its
history ring from ``GET /api/v1/history`` (so a paused dashboard can go back at once), and another polls
``/api/v1/alerts`` and ``/api/v1/diagnosis``. Both reconnect with back-off and report what went wrong
as a :class:`FeedStatus` line instead of raising; the event loop never waits on the network.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import requests
from textual.message_pump import MessagePump

from gpuwatch.model.alert import Alert
from gpuwatch.model.bodies import (
    MAX_JSON_BYTES,
    MAX_LINE_BYTES,
    BodyTooLarge,
    capped_lines,
    read_capped,
    response_chunks,
)
from gpuwatch.model.codec import snapshot_from_dict
from gpuwatch.model.finding import Finding
from gpuwatch.sampler.history import History
from gpuwatch.tui.feed import DIAGNOSIS_WINDOW_S, DiagnosisReady, FeedStatus, Mode, SnapshotReady

POLL_ALERTS_S = 2.0
#: The most snapshots a daemon's /api/v1/history sends in one answer (its own cap).
HISTORY_LIMIT = 3600
POLL_DIAGNOSIS_S = 5.0
T = TypeVar("T")


def normalise_url(text: str) -> str:
    """``host:port`` or a full URL -> ``http://host:port`` without a trailing slash."""
    text = text.strip().rstrip("/")
    if "://" not in text:
        text = "http://" + text
    return text


class RemoteFeed:
    """Streams snapshots from daemons; ``source`` in every message is the daemon's URL."""

    mode: Mode = "remote"

    def __init__(self, urls: list[str], *, token: str | None = None, connect_timeout_s: float = 3.0,
                 read_timeout_s: float = 30.0, history_capacity: int = 600,
                 diagnosis_window_s: float | None = None) -> None:
        self.urls = [normalise_url(u) for u in urls]
        #: Bearer token for daemons that require one for reads (non-loopback listen).
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.description = "connected to " + ", ".join(u.split("://", 1)[-1] for u in self.urls)
        #: The daemon's own default (30 s) unless asked for another window.
        self.diagnosis_path = "diagnosis" if diagnosis_window_s is None else f"diagnosis?window={diagnosis_window_s:g}"
        self.diagnosis_window_s = DIAGNOSIS_WINDOW_S if diagnosis_window_s is None else diagnosis_window_s
        self.alerts_note = ""
        self.timeouts = (connect_timeout_s, read_timeout_s)
        self.histories = {u: History(capacity=history_capacity) for u in self.urls}
        self._alerts: dict[str, tuple[Alert, ...] | None] = dict.fromkeys(self.urls)
        self._target: MessagePump | None = None
        self._stop = threading.Event()
        self._paused = False
        self._responses: dict[str, requests.Response] = {}
        #: What each daemon's /healthz last said of its notification delivery ("" while it delivers).
        self._delivery: dict[str, str] = dict.fromkeys(self.urls, "")
        self._threads: list[threading.Thread] = []

    def _post(self, msg: Any) -> None:
        target = self._target
        if target is not None:
            target.post_message(msg)

    def _stream(self, url: str) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                self._backfill(url)
                with requests.get(f"{url}/api/v1/stream", stream=True, timeout=self.timeouts,
                                  headers=self.headers) as resp:
                    resp.raise_for_status()
                    self._responses[url] = resp
                    # a delivery problem said before the stream connected still holds: "connected" must not hide it
                    problem = self._delivery[url]
                    self._post(FeedStatus(url, "error", f"{url}: {problem}") if problem else
                               FeedStatus(url, "ok", "connected"))
                    backoff = 1.0
                    # One line at a time, each bounded: a stream without line ends must not fill memory.
                    for line in capped_lines(response_chunks(resp), MAX_LINE_BYTES, f"{url}/api/v1/stream"):
                        if self._stop.is_set():
                            return
                        self._on_line(url, line)
                    raise ConnectionError("the daemon closed the stream")
            except Exception as exc:  # network, HTTP and format errors alike: report and retry
                if self._stop.is_set():
                    return
                self._post(FeedStatus(url, "error", f"{url}: {_why(exc)}; retrying in {backoff:.0f} s"))
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 30.0)

    def _backfill(self, url: str) -> None:
        """What the daemon kept (``/api/v1/history``) and this ring lacks, before streaming: a dashboard can go
        back in time as soon as it connects, and again over a reconnection's gap. A daemon that serves no history
        leaves the ring to the stream."""
        history = self.histories[url]
        latest = history.latest()
        query = f"limit={min(history.capacity, HISTORY_LIMIT)}" + (f"&since={latest.time!r}" if latest else "")
        with requests.get(f"{url}/api/v1/history?{query}", stream=True, timeout=self.timeouts,
                          headers=self.headers) as resp:
            if resp.status_code != 200:  # no history there (an older daemon: 404): the stream says the rest
                return
            for line in capped_lines(response_chunks(resp), MAX_LINE_BYTES, f"{url}/api/v1/history"):
                if self._stop.is_set():
                    return
                snap = snapshot_from_dict(json.loads(line))
                if latest is None or snap.time > latest.time:
                    history.append(snap)

    def _on_line(self, url: str, line: bytes) -> None:
        snap = snapshot_from_dict(json.loads(line))
        history = self.histories[url]
        latest = history.latest()
        if latest is not None and snap.time < latest.time:  # the daemon's clock (or its recording) started over
            history = self.histories[url] = History(capacity=history.capacity)
        if latest is None or snap.time != latest.time:  # the stream's first line: the newest the history sent
            history.append(snap)
        if not self._paused:
            self._post(SnapshotReady(url, snap, self._alerts[url], history))

    def _poll(self, url: str) -> None:
        next_diag = 0.0
        tick = 0.0
        while not self._stop.is_set():
            self._alerts[url] = self._get_list(url, "alerts", Alert.from_dict)
            if tick >= next_diag:
                body: dict[str, Any] = {}
                findings = self._get_list(url, self.diagnosis_path, Finding.from_dict, key="findings", body=body)
                # "watching: 4 of 30 s" while the daemon's window fills, said as the local pane says it
                note = str(body.get("watching") or "") if findings is not None else "the daemon serves no diagnosis"
                self._post(DiagnosisReady(url, None if findings is None else list(findings), note))
                self._check_delivery(url)
                next_diag = tick + POLL_DIAGNOSIS_S
            self._stop.wait(POLL_ALERTS_S)
            tick += POLL_ALERTS_S

    def _check_delivery(self, url: str) -> None:
        """Say on the status line when the daemon's notifications are not getting through (its /healthz
        ``delivery``), and again when they are; nothing when /healthz cannot be read (the stream says why)."""
        try:
            body = self._get_json(f"{url}/healthz")[1]
        except (requests.RequestException, ValueError):
            return
        problem = delivery_problem(body) if isinstance(body, dict) else ""
        if problem != self._delivery[url]:
            self._delivery[url] = problem
            self._post(FeedStatus(url, "error", f"{url}: {problem}") if problem else
                       FeedStatus(url, "ok", "notifications delivered"))

    def _get_list(self, url: str, path: str, decode: Callable[[dict[str, Any]], T],
                  key: str | None = None, body: dict[str, Any] | None = None) -> tuple[T, ...] | None:
        """``/api/v1/<path>``'s list decoded into model types here, at the edge; None when it cannot be read.
        ``body``: filled with the answer's other keys."""
        try:
            status, answer = self._get_json(f"{url}/api/v1/{path}")
            if status != 200:
                return None
            if body is not None and isinstance(answer, dict):
                body.update(answer)
            items = answer.get(key or path)
            return tuple(decode(item) for item in items) if isinstance(items, list) else None
        except (requests.RequestException, ValueError, AttributeError, KeyError, TypeError):
            return None

    def _get_json(self, url: str) -> tuple[int, Any]:
        """(status, the JSON body) read up to MAX_JSON_BYTES: ValueError (BodyTooLarge) past it."""
        with requests.get(url, timeout=self.timeouts, headers=self.headers, stream=True) as resp:
            return resp.status_code, json.loads(read_capped(response_chunks(resp), MAX_JSON_BYTES, url))

    def start(self, target: MessagePump) -> None:
        self._target = target
        for url in self.urls:
            for fn, name in ((self._stream, "stream"), (self._poll, "poll")):
                t = threading.Thread(target=fn, args=(url,), name=f"gpuwatch-{name}-{url}", daemon=True)
                t.start()
                self._threads.append(t)

    def pause(self, paused: bool) -> None:
        self._paused = paused

    def stop(self) -> None:
        self._stop.set()
        self._target = None
        for resp in list(self._responses.values()):
            try:
                resp.close()
            except Exception:  # closing a socket another thread reads from may race; it is going anyway
                pass


def delivery_problem(health: dict[str, Any]) -> str:
    """What a daemon's /healthz says of receivers that fail past ``[notify] unhealthy_after``, in words; ""
    when every receiver delivers (or the daemon has none)."""
    delivery = health.get("delivery")
    if not isinstance(delivery, dict) or delivery.get("ok", True):
        return ""
    found = delivery.get("receivers")
    receivers: dict[str, Any] = found if isinstance(found, dict) else {}
    down = []
    for name, r in sorted(receivers.items()):
        if not isinstance(r, dict) or r.get("ok", True):
            continue
        age = max(r.get("failing_for_s") or 0.0, r.get("oldest_pending_age_s") or 0.0)
        error = f", last: {str(r['last_error'])[:60]}" if r.get("last_error") else ""
        down.append(f"receiver {name} not delivering for {age / 60:.0f} min "
                    f"({r.get('consecutive_failures', 0)} failures{error})")
    return "; ".join(down) or "notifications are not being stored (the daemon's outbox fails)"


def _why(exc: Exception) -> str:
    if isinstance(exc, requests.ConnectionError):
        return "cannot connect (is 'gpuwatch daemon' running there?)"
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        if exc.response.status_code in (401, 403):
            return f"HTTP {exc.response.status_code}: the daemon wants a token (pass --token-file FILE)"
        return f"HTTP {exc.response.status_code} from /api/v1/stream"
    if isinstance(exc, BodyTooLarge):
        return str(exc)
    if isinstance(exc, (ValueError, KeyError, TypeError)):
        return f"bad snapshot in the stream ({type(exc).__name__}: {exc})"
    return f"{type(exc).__name__}: {exc}"
