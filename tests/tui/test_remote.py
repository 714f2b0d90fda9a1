"""``--connect``: the fleet view over real HTTP, one row per host and GPU, alerts from the daemon's API.

The server is the daemon's own HTTP server (:mod:`gpuwatch.daemon.server`) on 127.0.0.1, its routes speaking
the daemon's API (stream, alerts, diagnosis) about scripted hosts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pilot_wait import wait_for
from synthetic import snapshot

from gpuwatch.daemon.connections import ConnectionGuard
from gpuwatch.daemon.server import App, Request, Response, Server, json_response
from gpuwatch.model.codec import snapshot_to_dict
from gpuwatch.tui.app import make_app
from gpuwatch.tui.remote import RemoteFeed, normalise_url
from gpuwatch.tui.widgets.alerts_pane import AlertsPane
from gpuwatch.tui.widgets.fleet_table import FleetTable
from gpuwatch.tui.widgets.lines import LinesWidget, TextLine
from gpuwatch.tui.widgets.process_table import ProcessTable

ALERT = {"name": "GpuUnderusedCpuBound", "fingerprint": "ab12", "state": "firing",
         "labels": {"alertname": "GpuUnderusedCpuBound", "gpu": "1", "severity": "warning"},
         "annotations": {"summary": "GPU 1 waits on one CPU thread"}, "active_since": 1796205600.0,
         "fired_at": 1796205630.0, "resolved_at": None, "value": 99.0}
FINDING = {"code": "input_cpu_bound", "title": "the input pipeline is CPU-bound", "severity": "critical",
           "score": 0.9, "gpu_index": 1, "pid": 4111, "evidence": ["busiest thread 99 % of a core"],
           "fix": "move preprocessing out of the serving thread"}


class FakeDaemon:
    """Serves ``host`` with ``gpus`` GPUs: a snapshot every 50 ms on /api/v1/stream."""

    def __init__(self, host: str, gpus: int, health: dict[str, Any] | None = None, watching: str = "",
                 stream_delay_s: float = 0.0) -> None:
        self.host, self.gpus = host, gpus
        #: How long /api/v1/stream takes to answer (a daemon slow to start streaming, a slow network).
        self.stream_delay_s = stream_delay_s
        #: What /api/v1/diagnosis says while its window fills ("watching: 4 of 30 s"), as the real daemon does.
        self.watching = watching
        #: What /healthz answers (the status follows ``ok``), as the real daemon does.
        self.health: dict[str, Any] = health or {"ok": True, "delivery": {"ok": True, "receivers": {}}}
        self.server: Server | None = None
        self.port = 0

    def stream(self, request: Request) -> Response:
        time.sleep(self.stream_delay_s)

        def lines() -> Iterator[bytes]:
            tick = 0
            while True:
                yield (json.dumps(snapshot_to_dict(snapshot(tick, self.gpus, host=self.host))) + "\n").encode()
                tick += 1
                time.sleep(0.05)

        return Response(200, content_type="application/x-ndjson", chunks=lines())

    def alerts(self, request: Request) -> Response:
        return json_response({"alerts": [ALERT]})

    def diagnosis(self, request: Request) -> Response:
        return json_response({"findings": [FINDING], **({"watching": self.watching} if self.watching else {})})

    def healthz(self, request: Request) -> Response:
        return json_response(self.health, status=200 if self.health.get("ok") else 503)

    def __enter__(self) -> FakeDaemon:
        app = App()
        app.get("/healthz", self.healthz)
        app.get("/api/v1/stream", self.stream, head=False)
        app.get("/api/v1/alerts", self.alerts)
        app.get("/api/v1/diagnosis", self.diagnosis)
        self.server = Server("127.0.0.1", 0, app, ConnectionGuard(64, 30.0), request_timeout=30.0)
        self.server.start()
        self.port = self.server.port
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.server is not None
        self.server.close(0.0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def daemons() -> Iterator[tuple[FakeDaemon, FakeDaemon]]:
    with FakeDaemon("node-a", 2) as a, FakeDaemon("node-b", 1) as b:
        yield a, b


@pytest.mark.parametrize(("given", "expected"), [
    ("127.0.0.1:19464", "http://127.0.0.1:19464"),
    ("http://gpu-7:19464/", "http://gpu-7:19464"),
    (" https://x.example ", "https://x.example"),
])
def test_connect_urls_are_normalised(given: str, expected: str) -> None:
    assert normalise_url(given) == expected


async def test_fleet_view_has_one_row_per_host_and_gpu_and_follows_the_selection(daemons: Any) -> None:
    a, b = daemons
    app = make_app(RemoteFeed([a.url, b.url]))
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: bool(app.query(FleetTable)))  # mounted once the feed has answered
        fleet = app.query_one(FleetTable)
        await wait_for(pilot, lambda: fleet.row_count == 3)
        hosts = sorted((str(fleet.cells[k][0]), str(fleet.cells[k][1])) for k in fleet.keys)
        assert hosts == [("node-a", "0"), ("node-a", "1"), ("node-b", "0")]
        await wait_for(pilot, lambda: app.query_one("#alerts").counts.get("firing") == 1)  # type: ignore[attr-defined]
        alerts = app.query_one("#alerts", AlertsPane)
        assert [str(alerts.cells[k][2]) for k in alerts.keys] == ["GpuUnderusedCpuBound"]
        await wait_for(pilot, lambda: "CPU-bound" in app.query_one("#diagnosis .body", LinesWidget).plain)
        fleet.focus()
        await pilot.press("down", "down")
        await wait_for(pilot, lambda: app.dashboard.selected_source == b.url)
        await wait_for(pilot, lambda: {p.pid for p in app.query_one(ProcessTable).samples.values()}
                       == {4100, 4101, 4102})
        assert "node-b" in app.query_one("#status", TextLine).plain


async def test_a_daemon_still_watching_says_so_in_the_remote_pane_as_the_local_one_does() -> None:
    with FakeDaemon("node-a", 2, watching="watching: 4 of 30 s") as a:
        app = make_app(RemoteFeed([a.url]))
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: "CPU-bound" in app.query_one("#diagnosis .body", LinesWidget).plain)
            assert "watching: 4 of 30 s: findings so far" in app.query_one("#diagnosis .body", LinesWidget).plain


async def test_an_unreachable_daemon_is_reported_and_retried_without_blocking_the_screen() -> None:
    app = make_app(RemoteFeed(["127.0.0.1:9"]))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: bool(app.query(FleetTable)))  # mounted once the feed has answered
        fleet = app.query_one(FleetTable)
        await wait_for(pilot, lambda: fleet.row_count == 1)
        status = str(fleet.cells[fleet.keys[0]][-1])
        assert "cannot connect" in status and "retrying" in status
        await pilot.press("q")


async def test_two_daemons_reporting_the_same_hostname_are_told_apart_by_address() -> None:
    with FakeDaemon("twin", 1) as a, FakeDaemon("twin", 1) as b:
        app = make_app(RemoteFeed([a.url, b.url]))
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: bool(app.query(FleetTable)))  # mounted once the feed has answered
            fleet = app.query_one(FleetTable)
            expected = {f"twin@127.0.0.1:{a.port}", f"twin@127.0.0.1:{b.port}"}
            await wait_for(pilot, lambda: {str(fleet.cells[k][0]) for k in fleet.keys} == expected)


FAILING = {"ok": False, "delivery": {"ok": False, "unhealthy_after_s": 900.0, "receivers": {
    "slack": {"ok": False, "consecutive_failures": 41, "failing_for_s": 1260.0, "oldest_pending_age_s": 1250.0,
              "last_error": "HTTP 500", "last_success": None, "last_success_age_s": None}}}}


async def test_a_delivery_problem_found_before_the_stream_connects_is_not_hidden_by_connected() -> None:
    """The first /healthz read comes back before the stream answers: the stream's "connected" must not
    replace what it said (the problem is said once, and would otherwise never show)."""
    with FakeDaemon("node-a", 1, health=FAILING, stream_delay_s=1.5) as a:
        app = make_app(RemoteFeed([a.url]))
        async with app.run_test(size=(200, 40)) as pilot:
            status = lambda: app.query_one("#status", TextLine).plain  # noqa: E731
            await wait_for(pilot, lambda: bool(app.query(FleetTable)) or "node-a" in status(), timeout=15)
            await pilot.pause(2.5)  # the stream has connected since
            assert "receiver slack not delivering for 21 min" in status(), status()


async def test_a_daemon_whose_receiver_keeps_failing_says_so_on_the_status_line_until_it_delivers() -> None:
    with FakeDaemon("node-a", 1, health=FAILING) as a:
        app = make_app(RemoteFeed([a.url]))
        async with app.run_test(size=(200, 40)) as pilot:
            status = lambda: app.query_one("#status", TextLine).plain  # noqa: E731
            await wait_for(pilot, lambda: "receiver slack not delivering for 21 min" in status(), timeout=15)
            assert "41 failures, last: HTTP 500" in status()
            a.health = {"ok": True, "delivery": {"ok": True, "receivers": {}}}
            await wait_for(pilot, lambda: "slack" not in status(), timeout=15)
