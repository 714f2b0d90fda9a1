"""The daemon's HTTP server on the standard library, against a real daemon on 127.0.0.1: no aiohttp in the
process, keep-alive, HEAD, 405 with Allow, HTTP/1.0 streams, concurrent readers on the connection threads,
malformed requests logged once, and a stop that ends streams and closes connections and the socket."""

from __future__ import annotations

import http.client
import json
import logging
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
import requests

from daemon.conftest import RunningDaemon
from daemon.imports_probe import daemon_modules
from daemon.incident import write_recording
from daemon.process import DaemonProcess
from daemon.test_hostile_http import raw_request, status_of
from gpuwatch.config import Config, DaemonConfig
from gpuwatch.daemon.connections import ConnectionGuard
from gpuwatch.daemon.server import App, Response, Server


@pytest.fixture(scope="module")
def answered_modules() -> set[str]:
    """The modules of a daemon with no config file that answered every route, the stream and a reload."""
    return daemon_modules()


def test_a_daemon_that_answered_every_route_never_imported_aiohttp_nor_requests(answered_modules: set[str]) -> None:
    modules = answered_modules
    assert "gpuwatch.daemon.server" in modules and "gpuwatch.notify.delivery" in modules  # it is the daemon
    assert {m.split(".")[0] for m in modules} & {"aiohttp", "requests", "urllib3", "multidict", "yarl"} == set()


def test_a_daemon_without_a_config_file_or_a_typo_holds_no_toml_parser_and_no_spelling_suggester(
        answered_modules: set[str]) -> None:
    """They are imported when a config file or a mistyped name needs them (``model/spelling.py``)."""
    assert "gpuwatch.config.loader" in answered_modules  # it read its (absent) config
    assert answered_modules & {"tomllib", "tomli", "difflib"} == set()


def test_a_kept_alive_connection_answers_one_request_after_another(running: RunningDaemon) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", running.daemon.bound_port, timeout=5)
    try:
        answers = []
        for path in ("/healthz", "/api/v1/alerts", "/metrics", "/api/v1/history?limit=3", "/api/v1/snapshot"):
            conn.request("GET", path)
            r = conn.getresponse()
            answers.append((path, r.status, len(r.read()) > 0))
        sock = conn.sock
    finally:
        conn.close()
    assert answers == [(p, 200, True) for p, _, _ in answers]
    assert sock is not None  # one socket served all five (http.client reconnects only after a close)


def test_head_answers_a_get_routes_headers_without_its_body(running: RunningDaemon) -> None:
    running.wait_evaluated(120)  # the replay is over: the alerts no longer change between the two requests
    conn = http.client.HTTPConnection("127.0.0.1", running.daemon.bound_port, timeout=5)
    try:
        conn.request("GET", "/api/v1/alerts")
        got = conn.getresponse()
        body = got.read()
        conn.request("HEAD", "/api/v1/alerts")
        head = conn.getresponse()
        head_body = head.read()
    finally:
        conn.close()
    assert head.status == 200 and head_body == b""
    assert head.getheader("Content-Length") == str(len(body)) == got.getheader("Content-Length")
    assert head.getheader("Content-Type") == "application/json"


def test_a_wrong_method_on_a_route_is_405_naming_the_allowed_ones_and_an_unknown_path_404(
        running: RunningDaemon) -> None:
    put = requests.put(running.url + "/metrics", timeout=5)
    get_reload = requests.get(running.url + "/api/v1/reload", timeout=5)
    missing = requests.get(running.url + "/no/such/route", timeout=5)
    assert (put.status_code, put.headers["Allow"]) == (405, "GET, HEAD")
    assert (get_reload.status_code, get_reload.headers["Allow"]) == (405, "POST")
    assert missing.status_code == 404


def test_an_http_1_0_stream_client_gets_lines_without_chunking(running: RunningDaemon) -> None:
    port = running.daemon.bound_port
    assert port is not None
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /api/v1/stream HTTP/1.0\r\n\r\n")
        got = b""
        while b"\n" not in got.partition(b"\r\n\r\n")[2]:  # the head, then the first snapshot's line
            chunk = s.recv(65536)
            assert chunk, got[:300]
            got += chunk
    head, body = got.split(b"\r\n\r\n", 1)
    assert status_of(head) == 200 and b"transfer-encoding" not in head.lower()
    assert json.loads(body.split(b"\n", 1)[0])["seq"] >= 1


def test_many_readers_at_once_are_all_answered_while_the_replay_runs(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "r.ndjson.gz", n=400)
    d = RunningDaemon(Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s"))), recording,
                      speed=50.0)
    answers: list[tuple[str, int]] = []
    lock = threading.Lock()

    def reader(path: str) -> None:
        with requests.Session() as session:
            for _ in range(5):
                r = session.get(d.url + path, timeout=10)
                if path.startswith("/api/v1/history"):
                    assert all(json.loads(line)["seq"] for line in r.content.splitlines())  # whole lines
                elif path != "/metrics":
                    r.json()  # a whole, valid body
                with lock:
                    answers.append((path, r.status_code))

    paths = ["/metrics", "/api/v1/snapshot", "/healthz", "/api/v1/alerts", "/api/v1/history?limit=20"] * 4
    threads = [threading.Thread(target=reader, args=(p,)) for p in paths]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        d.stop()
    assert len(answers) == 5 * len(paths)
    assert {status for path, status in answers if path != "/healthz"} == {200}


def test_malformed_requests_are_logged_once_at_info_without_a_traceback(
        running: RunningDaemon, caplog: pytest.LogCaptureFixture) -> None:
    port = running.daemon.bound_port
    assert port is not None
    with caplog.at_level(logging.DEBUG, logger="gpuwatch.daemon.http"):
        statuses = [status_of(raw_request(port, b"GARBAGE\r\n\r\n")) for _ in range(5)]
    lines = [r for r in caplog.records if "malformed request" in r.getMessage()]
    assert statuses == [400] * 5
    assert len(lines) == 1 and lines[0].levelno == logging.INFO and not lines[0].exc_info
    assert "HTTP 400" in lines[0].getMessage()


def test_sigterm_ends_streams_closes_kept_alive_connections_and_the_socket(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "r.ndjson.gz", n=120)
    d = DaemonProcess(None, recording, tmp_path / "log", extra=("--loop",))
    idle = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    try:
        d.wait_healthy()
        idle.request("GET", "/healthz")
        assert idle.getresponse().read()  # answered; the connection stays open, waiting for the next head
        stream = requests.get(d.url + "/api/v1/stream", stream=True, timeout=10)
        lines = stream.iter_lines()
        assert json.loads(next(lines))["seq"] >= 1
        started = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        rest = list(lines)  # the stream ends with its last chunk, not a reset
        ended = time.monotonic() - started
        assert idle.sock is not None and idle.sock.recv(1) == b""  # closed by the daemon
        assert d.proc.wait(10) == 0
    finally:
        idle.close()
        d.kill()
    assert ended < 5.0 and all(json.loads(x)["seq"] >= 1 for x in rest if x)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", d.port), timeout=5).close()


def _runs_of(tid: int) -> int:
    """How many times the kernel has put thread ``tid`` on a CPU (schedstat's third field)."""
    return int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[2])


def test_the_accept_thread_sleeps_until_a_client_connects_and_close_wakes_it_at_once() -> None:
    """``serve_forever`` woke twice a second to look for a shutdown; the accept loop wakes for a client or
    for ``close`` only."""
    app = App()
    app.get("/ping", lambda request: Response(200, b"pong", "text/plain"))
    server = Server("127.0.0.1", 0, app, ConnectionGuard(8, 5.0), request_timeout=5.0)
    others = set(threading.enumerate())
    server.start()
    (thread,) = [t for t in threading.enumerate() if t.name == "gpuwatch-http" and t not in others]
    assert thread.native_id is not None
    time.sleep(0.2)  # settled in its wait
    before = _runs_of(thread.native_id)
    time.sleep(1.6)
    assert _runs_of(thread.native_id) == before  # not one wake-up while no one connected
    assert requests.get(f"http://127.0.0.1:{server.port}/ping", timeout=5).text == "pong"
    started = time.monotonic()
    server.close(1.0)
    assert not thread.is_alive() and time.monotonic() - started < 1.0
