"""Every body read from the network is bounded: a peer on 127.0.0.1 that answers 200 and never stops sending
(a receiver, a daemon behind --connect or `report`) is cut, and said so; the reader's memory stays flat."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from daemon.incident import write_config, write_recording
from daemon.process import DaemonProcess
from endless import EndlessServer
from hwm import peak_mib

from gpuwatch.config import NotifyConfig, ReceiverConfig
from gpuwatch.model.bodies import MAX_JSON_BYTES, BodyTooLarge, capped_lines, read_capped
from gpuwatch.notify import Deliverer, Outbox, Target, parse_secret
from gpuwatch.notify.delivery import MAX_RESPONSE_BYTES
from gpuwatch.tui.feed import FeedStatus
from gpuwatch.tui.remote import RemoteFeed

MIB = 1024 * 1024
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def endless() -> Iterator[EndlessServer]:
    server = EndlessServer()
    yield server
    server.close()


@pytest.fixture
def endless_line() -> Iterator[EndlessServer]:
    server = EndlessServer(newlines=False)
    yield server
    server.close()


def test_lines_are_cut_at_their_limit_wherever_the_chunks_break() -> None:
    chunks = [b'{"a"', b':1}\n\n{"b":2}\r', b"\n", b"x" * 10, b"y" * 10]
    assert list(capped_lines(iter(chunks[:3]), 100, "peer")) == [b'{"a":1}', b'{"b":2}']
    with pytest.raises(BodyTooLarge, match="a line of more than"):
        list(capped_lines(iter(chunks), 15, "peer"))
    with pytest.raises(BodyTooLarge, match="peer sent more than 1 KiB"):
        read_capped(iter([b"x" * 600, b"y" * 600]), 1024, "peer")


def test_an_endless_receiver_response_is_cut_and_the_notification_counts_as_delivered(
        tmp_path: Path, endless: EndlessServer, caplog: pytest.LogCaptureFixture) -> None:
    rc = ReceiverConfig(name="ops", kind="generic", url=endless.url + "/hook", secret_env="X")
    cfg = NotifyConfig(initial_backoff=0.05, max_backoff=0.2, timeout=5.0, max_age=30.0)
    d = Deliverer(Outbox(tmp_path / "outbox.sqlite"), {"ops": Target(rc, parse_secret(SECRET))}, cfg)
    with d.outbox.transaction() as conn:
        d.outbox.enqueue(conn, "msg_0", "ops", b'{"n":1}', time.time())

    async def drain() -> float:
        stop = asyncio.Event()
        task = asyncio.create_task(d.run(stop))
        started = time.monotonic()
        while time.monotonic() - started < 10 and d.outbox.counts().get(("ops", "pending")):
            await asyncio.sleep(0.02)
        took = time.monotonic() - started
        stop.set()
        await task
        return took

    took = asyncio.run(drain())
    assert dict(d.outbox.conn.execute("SELECT webhook_id, status FROM outbox").fetchall()) == {"msg_0": "delivered"}
    assert took < cfg.timeout  # cut at the limit, not at the timeout
    assert d.responses_cut == 1
    assert endless.served < 64 * MIB  # what the socket buffers took, not what a timeout lets through
    assert any(f"more than {MAX_RESPONSE_BYTES // 1024} KiB" in r.getMessage() for r in caplog.records)


def test_a_daemon_whose_receiver_answers_without_end_keeps_its_memory(tmp_path: Path, endless: EndlessServer) -> None:
    class Url:
        url = endless.url + "/hook"

    config = write_config(tmp_path, tmp_path / "state", Url, notify='timeout = "5s"')
    recording = write_recording(tmp_path / "r.ndjson.gz", n=600, recovers=False)
    daemon = DaemonProcess(config, recording, tmp_path / "daemon.log", extra=("--speed", "20"))
    try:
        deadline = time.monotonic() + 30
        while endless.requests < 2:
            assert time.monotonic() < deadline, "the daemon never notified"
            time.sleep(0.1)
        time.sleep(2.0)  # deliveries to an endless receiver in flight
        rss = psutil.Process(daemon.proc.pid).memory_info().rss
        health = daemon.healthz().json()
    finally:
        daemon.stop()
    assert rss < 200 * MIB, f"daemon RSS {rss / MIB:.0f} MiB"
    assert endless.served < 256 * MIB
    assert health["delivery"]["receivers"]["ops"]["consecutive_failures"] == 0


def test_a_connected_dashboard_cuts_an_endless_answer(endless: EndlessServer, endless_line: EndlessServer) -> None:
    feed = RemoteFeed([endless.url])
    with pytest.raises(BodyTooLarge, match=f"more than {MAX_JSON_BYTES // MIB:g} MiB"):
        feed._get_json(endless.url + "/api/v1/alerts")
    assert feed._get_list(endless.url, "alerts", dict) is None  # said as "cannot be read", no exception

    posted: list[FeedStatus] = []

    class Target:
        def post_message(self, msg: object) -> None:
            if isinstance(msg, FeedStatus):
                posted.append(msg)

    line_feed = RemoteFeed([endless_line.url])
    line_feed._target = Target()  # type: ignore[assignment]
    thread = threading.Thread(target=line_feed._stream, args=(endless_line.url,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not any("a line of more than" in s.text for s in posted):
        assert time.monotonic() < deadline, [s.text for s in posted]
        time.sleep(0.05)
    line_feed._stop.set()
    thread.join(10)
    assert endless_line.served < 256 * MIB


def test_report_from_an_endless_daemon_is_one_line_and_bounded(tmp_path: Path, endless: EndlessServer) -> None:
    hwm = tmp_path / "hwm"
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "hwm.py"), "report", "--connect",
                           endless.url], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "HWM_FILE": str(hwm)})
    assert done.returncode != 0
    assert "sent more than" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert peak_mib(hwm) < 200
