"""The HTTP API (served by :mod:`gpuwatch.daemon.server`, each request on its connection's thread). Anything
that changes state needs ``Authorization: Bearer <token>``. Reads are open on a loopback address; on any
other address (``--allow-remote``) they need the token too, except /healthz, unless
``[daemon] token_for_reads = false`` (process names and users are in the snapshot).

    GET  /                    a small HTML page linking the endpoints below
    GET  /metrics             Prometheus text exposition
    GET  /healthz             200 once a snapshot is flowing, 503 before or when sampling stalled
    GET  /api/v1/snapshot     the latest Snapshot as JSON
    GET  /api/v1/stream       NDJSON: the latest Snapshot, then one per tick
    GET  /api/v1/alerts       {"alerts": [...]} pending, firing and recently resolved
    GET  /api/v1/diagnosis    {"findings": [...]} over the last ?window=S seconds (default 30), each with
                              "since" (Unix time it has held from), ?pid=N; "start" and "end" bound the
                              samples judged, "watching" ("watching: 4 of 30 s") while they do not yet
                              fill the window; the default question is the
                              daemon's one shared evaluation (the one /metrics serves), made at most once
                              per snapshot however many clients ask
    GET  /api/v1/history      NDJSON: the Snapshots the daemon keeps ([sampler] history, 10 min by default),
                              oldest first; ?since=T&until=T (Unix seconds, both ends included) and ?limit=N
                              (the newest N of them; default and most: HISTORY_LIMIT); a remote dashboard
                              goes back in time with them
    GET  /api/v1/efficiency   hourly GPU-second roll-ups over ?window=S (daemon/accounting.py)
    GET  /api/v1/rollouts     {"rollouts": [...]} judged since ?since= (Unix seconds or a duration back,
                              7d); each a workload replaced on a GPU, before against after (daemon/rollouts.py)
    POST /api/v1/reload       re-read config and rules (token required), like SIGHUP
"""

from __future__ import annotations

import hmac
import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuwatch.daemon.pipeline import Pipeline
from gpuwatch.daemon.server import App, Request, Response, json_response
from gpuwatch.diagnosis import SharedDiagnosis
from gpuwatch.doctor import RECENT_WINDOW_S
from gpuwatch.exporter import CONTENT_TYPE, Exporter, render
from gpuwatch.model.codec import snapshot_to_dict
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)


@dataclass
class Services:
    pipeline: Pipeline
    exporter: Exporter
    history: Callable[[], list[Snapshot]]
    #: The one live-doctor evaluation, shared with /metrics.
    diagnosis: SharedDiagnosis
    health: Callable[[], tuple[bool, dict[str, Any]]]
    #: Re-read config and rules; called on a connection's thread (it waits for the event loop's reload).
    reload: Callable[[], tuple[bool, str]]
    token: str | None = None
    #: Reads (everything but /healthz) need the token as well.
    token_for_reads: bool = False
    max_stream_clients: int = 64
    #: Why the last /metrics render failed (None once one succeeds): /healthz and the watchdog read it.
    render_error: str | None = None

    def set_access(self, token: str | None, token_for_reads: bool, max_stream_clients: int) -> None:
        """A reload's token, whether reads need it, and the stream cap: requests from now on obey them."""
        self.token = token
        self.token_for_reads = token_for_reads
        self.max_stream_clients = max_stream_clients


DIAGNOSIS_WINDOW_S = RECENT_WINDOW_S
#: Most Snapshots one /api/v1/history answer holds: an hour at 1 s. Sent in chunks of HISTORY_CHUNK, each
#: encoded as it is sent, so a long answer never builds one large body.
HISTORY_LIMIT, HISTORY_CHUNK = 3600, 100
NDJSON = "application/x-ndjson"


def _authorised(request: Request, token: str | None) -> Response | None:
    if token is None:
        return json_response({"error": "no token is configured; set token_file in [daemon] or send SIGHUP instead"},
                             403)
    scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
    # Header bytes arrive decoded as Latin-1; encode them back as they came (bytes that are not the token's
    # UTF-8 are never equal to it).
    given_bytes = given.strip().encode("latin-1", "replace") if scheme.lower() == "bearer" else b""
    if not hmac.compare_digest(given_bytes, token.encode()):
        return json_response({"error": "missing or wrong bearer token"}, 401)
    return None


class Api:
    """The handlers over one :class:`Services`; each runs on its connection's thread."""

    def __init__(self, services: Services) -> None:
        self.s = services

    def metrics(self, request: Request) -> Response:
        s = self.s
        try:
            body = render(s.exporter.registry)
        except Exception as exc:  # a bug: say it on /healthz (and stop the watchdog) rather than only per scrape
            error = f"{type(exc).__name__}: {exc}"[:300]
            if error != s.render_error:
                log.exception("rendering /metrics failed")
            s.render_error = error
            return Response(500, f"cannot render /metrics: {error}\n".encode())
        s.render_error = None
        return Response(200, body, CONTENT_TYPE)

    def healthz(self, request: Request) -> Response:
        ok, info = self.s.health()
        return json_response({"status": "ok" if ok else "unavailable", **info}, 200 if ok else 503)

    def snapshot(self, request: Request) -> Response:
        snap = self.s.pipeline.latest
        if snap is None:
            return json_response({"error": "no snapshot yet"}, 503)
        return json_response(snapshot_to_dict(snap))

    def stream(self, request: Request) -> Response:
        """The latest Snapshot, then one per tick from this client's bounded queue (a client that stops
        reading loses its oldest lines, then is dropped when a write outlasts the socket timeout)."""
        s = self.s
        hub = s.pipeline.hub
        queue = hub.subscribe(s.max_stream_clients)
        if queue is None:
            return json_response({"error": f"{s.max_stream_clients} stream clients already; try again later"}, 503)
        latest = s.pipeline.latest

        def lines() -> Iterator[bytes]:
            if latest is not None:
                yield (json.dumps(snapshot_to_dict(latest), separators=(",", ":")) + "\n").encode()
            while (line := queue.get()) is not None:
                yield line

        return Response(200, content_type=NDJSON, headers={"Cache-Control": "no-cache"}, chunks=lines(),
                        on_close=lambda: hub.unsubscribe(queue))

    def alerts(self, request: Request) -> Response:
        return json_response({"alerts": [a.to_dict() for a in self.s.pipeline.alerts]})

    def diagnosis(self, request: Request) -> Response:
        s = self.s
        try:
            pid = int(request.query["pid"]) if "pid" in request.query else None
            window = float(request.query.get("window", DIAGNOSIS_WINDOW_S))
        except ValueError:
            return json_response({"error": "pid must be a whole number and window a number of seconds"}, 400)
        if not math.isfinite(window) or window <= 0:
            return json_response({"error": "window must be a positive number of seconds"}, 400)
        if not s.history():
            return json_response({"error": "no snapshot yet"}, 503)
        evaluation = s.diagnosis.ask(window, pid)
        if evaluation.findings is None:
            return json_response({"error": evaluation.note}, 500)
        # start and end: the samples every finding comes from; "watching" while the window is still filling
        watching = {"watching": evaluation.watching} if evaluation.watching else {}
        return json_response({"findings": [f.to_dict() for f in evaluation.findings],
                              "snapshots": evaluation.snapshots, "window_s": window, "start": evaluation.start,
                              "end": evaluation.end, **watching})

    def history(self, request: Request) -> Response:
        asked = _history_query(request.query)
        if isinstance(asked, str):
            return json_response({"error": asked}, 400)
        since, until, limit = asked
        kept = [x for x in self.s.history() if since <= x.time <= until][-limit:]
        chunks = (_ndjson(kept[at:at + HISTORY_CHUNK]) for at in range(0, len(kept), HISTORY_CHUNK))
        return Response(200, content_type=NDJSON, headers={"Cache-Control": "no-cache"}, chunks=chunks)

    def reload(self, request: Request) -> Response:
        denied = _authorised(request, self.s.token)
        if denied is not None:
            return denied
        ok, message = self.s.reload()
        return json_response({"reloaded": ok, "message": message}, 200 if ok else 422)

    def read_guard(self, request: Request) -> Response | None:
        """Every method and path, not only GET routes (HEAD, 404s and 405s too), except /healthz."""
        s = self.s
        if s.token_for_reads and request.path != "/healthz":
            return _authorised(request, s.token)
        return None


def _history_query(query: Mapping[str, str]) -> tuple[float, float, int] | str:
    """``(since, until, limit)`` from ``?since=&until=&limit=``, or what is wrong with them in words."""
    try:
        since, until = float(query.get("since", "-inf")), float(query.get("until", "inf"))
        limit = int(query.get("limit", HISTORY_LIMIT))
    except ValueError:
        return "since and until must be Unix times in seconds and limit a whole number"
    if math.isnan(since) or math.isnan(until) or since > until:
        return "since must be a time at or before until"
    if not 1 <= limit <= HISTORY_LIMIT:
        return f"limit must be between 1 and {HISTORY_LIMIT}"
    return since, until, limit


def _ndjson(snapshots: Sequence[Snapshot]) -> bytes:
    return b"".join((json.dumps(snapshot_to_dict(x), separators=(",", ":")) + "\n").encode() for x in snapshots)


INDEX_HTML = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpuwatch</title></head>
<body><h1>gpuwatch</h1>
<ul>
<li><a href="metrics">/metrics</a>: Prometheus exposition</li>
<li><a href="healthz">/healthz</a>: 200 while snapshots flow</li>
<li><a href="api/v1/snapshot">/api/v1/snapshot</a>: the latest snapshot (JSON)</li>
<li><a href="api/v1/stream">/api/v1/stream</a>: one snapshot per line (NDJSON)</li>
<li><a href="api/v1/alerts">/api/v1/alerts</a>: pending, firing and recently resolved alerts</li>
<li><a href="api/v1/diagnosis">/api/v1/diagnosis</a>: the doctor's findings</li>
<li><a href="api/v1/history">/api/v1/history</a>: the snapshots kept, oldest first (NDJSON)</li>
</ul>
<p>POST /api/v1/reload re-reads config and rules (with the bearer token).</p>
</body></html>
"""


def index(request: Request) -> Response:
    """What a person who opens the port in a browser sees: where to go, rather than a 404."""
    return Response(200, INDEX_HTML, "text/html; charset=utf-8")


def build_app(services: Services) -> App:
    api = Api(services)
    app = App()
    app.guards.append(api.read_guard)
    app.get("/", index)
    app.get("/metrics", api.metrics)
    app.get("/healthz", api.healthz)
    app.get("/api/v1/snapshot", api.snapshot)
    app.get("/api/v1/stream", api.stream, head=False)  # HEAD would start a stream
    app.get("/api/v1/alerts", api.alerts)
    app.get("/api/v1/diagnosis", api.diagnosis)
    app.get("/api/v1/history", api.history)
    app.post("/api/v1/reload", api.reload)
    return app
