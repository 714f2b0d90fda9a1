"""DcgmSource against a real HTTP server on 127.0.0.1: sample bodies, every failure mode, back-off, recovery."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from gpuwatch.sources.dcgm import DcgmError, DcgmSource
from sources.dcgm.conftest import ManualClock
from sources.dcgm.exporter import FakeExporter, fixture, unused_port

KIB = 1024
H100 = fixture("dcgm-exporter-sample.prom")
FAST: dict[str, Any] = {"connect_timeout": 0.5, "read_timeout": 0.4, "total_timeout": 0.8, "jitter": 0.0}


@pytest.mark.parametrize(("body", "gzip"), [
    ("dcgm-exporter-sample.prom", False),
    ("dcgm-exporter-sample.prom", True),
    ("dcgm-exporter-sample-h200-k8s.prom", False),
    ("dcgm-exporter-4.10-h200-k8s.prom", True),
], ids=["h100", "h100-gzip", "h200-k8s", "4.10-gzip"])
def test_a_served_sample_gives_both_gpus_with_uuid_power_and_sm_clock(exporter: FakeExporter, body: str,
                                                                       gzip: bool) -> None:
    exporter.serve(fixture(body), gzip=gzip)
    reading = DcgmSource(exporter.url, **FAST).poll(0.0, ())
    assert reading.gpus is not None and len(reading.gpus) == 2
    for gpu in reading.gpus:
        assert gpu.uuid.startswith("GPU-") and gpu.power_w and gpu.sm_clock_mhz in (1980.0, 345.0)
        assert gpu.profiling["dcgm"].sm_active is not None


# (id, how the exporter misbehaves, source options, the message, longest the poll may take)
FAILURES: list[tuple[str, dict[str, Any], dict[str, Any], str, float]] = [
    ("http-500", {"mode": "body", "status": 500, "body": b"oops"}, {}, r"answered HTTP 500", 1.0),
    ("empty-body-during-reload", {"mode": "body", "body": b""}, {}, r"^127.0.0.1:\d+: empty body", 1.0),
    ("garbage", {"mode": "body", "body": b"\x89PNG\r\n\x1a\n\x00\x00binary"}, {},
     r"^127.0.0.1:\d+: not Prometheus text", 1.0),
    ("html-page", {"mode": "body", "body": b"<html><h1>Bad Gateway</h1></html>"}, {},
     r"^127.0.0.1:\d+: not Prometheus text", 1.0),
    ("no-answer", {"mode": "hang"}, {}, r"sent nothing for 0.4 s", 1.5),
    ("declared-huge-body", {"mode": "body", "body": b"x", "declared_length": 64 * 1024 * 1024},
     {"max_bytes": 256 * KIB}, r"offered a 64.0 MiB body, over the 0.25 MiB cap", 1.0),
    ("endless-body", {"mode": "endless"}, {"max_bytes": 256 * KIB}, r"more than the 0.25 MiB cap; stopped", 1.5),
    ("slow-drip", {"mode": "drip", "body": H100, "drip_s": 0.02}, {},
     r"took over 0.8 s to send the page \(\d+ bytes so far\)", 1.5),
    ("stalls-mid-page", {"mode": "drip", "body": H100, "drip_s": 1.0}, {}, r"stopped sending for 0.4 s mid-page$", 1.0),
    ("dies-mid-page", {"mode": "reset", "body": H100}, {}, r"^127.0.0.1:\d+ closed the connection mid-page$", 1.0),
    ("drips-its-headers", {"mode": "drip-headers", "drip_s": 0.05}, {}, r"took over 0.8 s to answer; gave up$", 1.5),
    ("redirect-loop", {"mode": "redirect-loop"}, {}, r"redirected more than 3 times$", 1.0),
    ("corrupt-gzip", {"mode": "body", "body": b"not gzip at all", "gzip": True, "compress": False}, {},
     r"^127.0.0.1:\d+ sent a body that does not decompress$", 1.0),
]


@pytest.mark.parametrize(("behaviour", "options", "message", "within"), [f[1:] for f in FAILURES],
                         ids=[f[0] for f in FAILURES])
def test_each_failure_raises_one_clear_line_quickly(exporter: FakeExporter, behaviour: dict[str, Any],
                                                    options: dict[str, Any], message: str, within: float) -> None:
    exporter.behave(**behaviour)
    source = DcgmSource(exporter.url, **{**FAST, **options})
    started = time.monotonic()
    with pytest.raises(DcgmError) as err:
        source.poll(0.0, ())
    elapsed = time.monotonic() - started
    assert re.search(message, str(err.value)), str(err.value)
    assert "\n" not in str(err.value) and "Traceback" not in str(err.value)
    assert elapsed < within
    assert source.deadline_s > elapsed  # the sampler would still have been waiting: the message reaches it


def test_connection_refused_names_the_endpoint() -> None:
    port = unused_port()
    with pytest.raises(DcgmError, match=rf"^cannot reach 127.0.0.1:{port}: connection refused$"):
        DcgmSource(f"http://127.0.0.1:{port}/metrics", **FAST).poll(0.0, ())


@pytest.mark.parametrize("url", ["127.0.0.1:9400/metrics", "ftp://node/metrics", "http:///metrics"])
def test_a_url_that_is_not_http_is_refused_at_construction_with_an_example(url: str) -> None:
    with pytest.raises(ValueError, match="looks like http://node:9400/metrics"):
        DcgmSource(url)


def test_after_a_failure_polls_inside_the_backoff_window_do_not_touch_the_exporter(
        exporter: FakeExporter, clock: ManualClock) -> None:
    exporter.behave(mode="body", status=503, body=b"")
    source = DcgmSource(exporter.url, **FAST, backoff_initial=1.0, clock=clock)
    with pytest.raises(DcgmError, match="HTTP 503"):
        source.poll(0.0, ())
    for _ in range(5):
        clock.advance(0.1)
        with pytest.raises(DcgmError, match=r"HTTP 503.*; next try in 0\.\d s$"):
            source.poll(0.0, ())
    assert exporter.requests == 1


@pytest.mark.parametrize(("failures", "delay"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)])
def test_backoff_doubles_after_each_failure_up_to_the_cap(clock: ManualClock, failures: int, delay: float) -> None:
    source = DcgmSource(f"http://127.0.0.1:{unused_port()}/metrics", **FAST, backoff_initial=1.0,
                        backoff_max=10.0, clock=clock)
    for attempt in range(failures):
        if attempt:
            clock.advance(100.0)  # well past any window: this poll tries the exporter again
        with pytest.raises(DcgmError, match=r"connection refused$"):
            source.poll(0.0, ())
    clock.advance(delay - 0.2)
    with pytest.raises(DcgmError, match=r"next try in 0\.2 s$"):
        source.poll(0.0, ())


def test_the_source_recovers_by_itself_when_the_exporter_comes_back(exporter: FakeExporter,
                                                                    clock: ManualClock) -> None:
    exporter.serve(H100)
    source = DcgmSource(exporter.url, **FAST, clock=clock)
    assert source.poll(0.0, ()).gpus
    exporter.stop()
    for _ in range(3):  # three real attempts, each refused, each followed by a longer wait
        with pytest.raises(DcgmError, match="connection refused"):
            source.poll(0.0, ())
        clock.advance(60.0)
    exporter.start()
    reading = source.poll(0.0, ())
    assert reading.gpus and len(reading.gpus) == 2
    assert source.failures == 0
    exporter.stop()
    with pytest.raises(DcgmError):
        source.poll(0.0, ())
    clock.advance(1.01)  # back-off starts over at the first step after a success
    with pytest.raises(DcgmError, match=r"connection refused$"):
        source.poll(0.0, ())
