"""The HTTP API (aiohttp). Anything that changes state needs ``Authorization: Bearer <token>``. Reads are
open on a loopback address; on any other address (``--allow-remote``) they need the token too, except
/healthz, unless ``[daemon] token_for_reads = false`` (process names and users are in the snapshot).

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

import asyncio
import hmac
import json
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from gpuwatch.daemon.pipeline import Pipeline
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
    reload: Callable[[], Awaitable[tuple[bool, str]]]
    token: str | None = None
    #: Reads (everything but /healthz) need the token as well.
    token_for_reads: bool = False
    max_stream_clients: int = 64
    #: Seconds a stream client may go without reading before it is dropped.
    write_timeout: float = 30.0
    #: Why the last /metrics render failed (None once one succeeds): /healthz and the watchdog read it.
    render_error: str | None = None

    def set_access(self, token: str | None, token_for_reads: bool, max_stream_clients: int) -> None:
        """A reload's token, whether reads need it, and the stream cap: requests from now on obey them."""
        self.token = token
        self.token_for_reads = token_for_reads
        self.max_stream_clients = max_stream_clients


SERVICES = web.AppKey("services", Services)
DIAGNOSIS_WINDOW_S = RECENT_WINDOW_S
#: Most Snapshots one /api/v1/history answer holds: an hour at 1 s. Sent in chunks of HISTORY_CHUNK, each
#: encoded off the event loop, so a long answer neither holds the loop nor builds one large body.
HISTORY_LIMIT, HISTORY_CHUNK = 3600, 100


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(data, separators=(",", ":")).encode(), status=status,
                        content_type="application/json")


def _authorised(request: web.Request, token: str | None) -> web.Response | None:
    if token is None:
        return _json({"error": "no token is configured; set token_file in [daemon] or send SIGHUP instead"}, 403)
    scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
    # Header bytes that are not UTF-8 arrive as surrogates; encode them back as they came (never equal).
    given_bytes = given.strip().encode("utf-8", "surrogateescape") if scheme.lower() == "bearer" else b""
    if not hmac.compare_digest(given_bytes, token.encode()):
        return _json({"error": "missing or wrong bearer token"}, 401)
    return None


async def metrics(request: web.Request) -> web.Response:
    s = request.app[SERVICES]
    try:
        body = await asyncio.get_running_loop().run_in_executor(None, render, s.exporter.registry)
    except Exception as exc:  # a bug: say it on /healthz (and stop the watchdog) rather than only per scrape
        error = f"{type(exc).__name__}: {exc}"[:300]
        if error != s.render_error:
            log.exception("rendering /metrics failed")
        s.render_error = error
        return web.Response(status=500, text=f"cannot render /metrics: {error}\n")
    s.render_error = None
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def healthz(request: web.Request) -> web.Response:
    ok, info = request.app[SERVICES].health()
    return _json({"status": "ok" if ok else "unavailable", **info}, 200 if ok else 503)


async def snapshot(request: web.Request) -> web.Response:
    snap = request.app[SERVICES].pipeline.latest
    if snap is None:
        return _json({"error": "no snapshot yet"}, 503)
    return _json(snapshot_to_dict(snap))


async def stream(request: web.Request) -> web.StreamResponse:
    s = request.app[SERVICES]
    pipeline = s.pipeline
    if pipeline.hub.clients >= s.max_stream_clients:
        return _json({"error": f"{s.max_stream_clients} stream clients already; try again later"}, 503)
    resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    queue = pipeline.hub.subscribe()
    try:
        if pipeline.latest is not None:
            first = (json.dumps(snapshot_to_dict(pipeline.latest), separators=(",", ":")) + "\n").encode()
            await asyncio.wait_for(resp.write(first), s.write_timeout)
        while True:
            line = await queue.get()
            if line is None:
                break
            # A client that reads nothing for this long is dropped, so stalled clients free their slot.
            await asyncio.wait_for(resp.write(line), s.write_timeout)
    except (ConnectionError, asyncio.CancelledError, asyncio.TimeoutError):
        pass  # the client went away or stopped reading
    finally:
        pipeline.hub.unsubscribe(queue)
    return resp


async def alerts(request: web.Request) -> web.Response:
    return _json({"alerts": [a.to_dict() for a in request.app[SERVICES].pipeline.alerts]})


async def diagnosis(request: web.Request) -> web.Response:
    s = request.app[SERVICES]
    try:
        pid = int(request.query["pid"]) if "pid" in request.query else None
        window = float(request.query.get("window", DIAGNOSIS_WINDOW_S))
    except ValueError:
        return _json({"error": "pid must be a whole number and window a number of seconds"}, 400)
    if not math.isfinite(window) or window <= 0:
        return _json({"error": "window must be a positive number of seconds"}, 400)
    if not s.history():
        return _json({"error": "no snapshot yet"}, 503)
    evaluation = await asyncio.get_running_loop().run_in_executor(None, s.diagnosis.ask, window, pid)
    if evaluation.findings is None:
        return _json({"error": evaluation.note}, 500)
    # start and end: the samples every finding comes from; "watching" while the window is still filling
    return _json({"findings": [f.to_dict() for f in evaluation.findings], "snapshots": evaluation.snapshots,
                  "window_s": window, "start": evaluation.start, "end": evaluation.end,
                  **({"watching": evaluation.watching} if evaluation.watching else {})})


def _history_query(query: Any) -> tuple[float, float, int] | str:
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


async def history(request: web.Request) -> web.StreamResponse:
    s = request.app[SERVICES]
    asked = _history_query(request.query)
    if isinstance(asked, str):
        return _json({"error": asked}, 400)
    since, until, limit = asked
    kept = [x for x in s.history() if since <= x.time <= until][-limit:]
    resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    loop = asyncio.get_running_loop()
    try:
        for at in range(0, len(kept), HISTORY_CHUNK):
            chunk = await loop.run_in_executor(None, _ndjson, kept[at:at + HISTORY_CHUNK])
            await asyncio.wait_for(resp.write(chunk), s.write_timeout)
        await resp.write_eof()
    except (ConnectionError, asyncio.TimeoutError):
        pass  # the client went away or stopped reading
    return resp


async def reload(request: web.Request) -> web.Response:
    s = request.app[SERVICES]
    denied = _authorised(request, s.token)
    if denied is not None:
        return denied
    ok, message = await s.reload()
    return _json({"reloaded": ok, "message": message}, 200 if ok else 422)


@web.middleware
async def _read_guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                      ) -> web.StreamResponse:
    s = request.app[SERVICES]
    # Every method, not only GET: aiohttp answers HEAD (and 405s) through the same routes.
    if s.token_for_reads and request.path != "/healthz":
        denied = _authorised(request, s.token)
        if denied is not None:
            return denied
    return await handler(request)


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


async def index(request: web.Request) -> web.Response:
    """What a person who opens the port in a browser sees: where to go, rather than a 404."""
    return web.Response(body=INDEX_HTML, content_type="text/html", charset="utf-8")


def build_app(services: Services, middlewares: Sequence[Middleware] = ()) -> web.Application:
    app = web.Application(middlewares=[*middlewares, _read_guard])
    app[SERVICES] = services
    app.router.add_get("/", index)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/api/v1/snapshot", snapshot)
    app.router.add_get("/api/v1/stream", stream, allow_head=False)  # HEAD would start a stream
    app.router.add_get("/api/v1/alerts", alerts)
    app.router.add_get("/api/v1/diagnosis", diagnosis)
    app.router.add_get("/api/v1/history", history)
    app.router.add_post("/api/v1/reload", reload)
    return app
