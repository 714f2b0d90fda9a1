"""XID errors through the health worker: an NVML event set waited on by its own thread, the XID's code,
count and time in the Snapshot, recent for ten minutes; a GPU or binding without events; a wait that fails;
stopping within the wait's timeout."""

from __future__ import annotations

import logging
import time

import pynvml
import pytest
from fakes.fake_pynvml import FakeClock, make_fake_nvml

from gpuwatch.sources.nvml import NvmlSource
from gpuwatch.sources.nvml.health_worker import EVENT_WAIT_S, XID_POLL_S, HealthWorker

from .test_health import health_of, worker


def test_an_xid_reaches_the_snapshot_through_the_worker_thread() -> None:
    fake = make_fake_nvml(gpus=2)
    source = NvmlSource(nvml=fake, clock=FakeClock())
    try:
        fake.xid(1, 79)
        fake.xid(1, 48)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            health = source.poll(1000.0, ()).gpus[1].health
            if health is not None and health.xid_count == 2:
                break
            time.sleep(0.01)
        gpus = source.poll(1001.0, ()).gpus
    finally:
        source.close()
    health = gpus[1].health
    assert health is not None and (health.xid_count, health.xid_last, health.xid_recent) == (2, 48, 48)
    assert health.xid_last_time is not None and abs(health.xid_last_time - time.time()) < 5
    assert gpus[0].health is not None and gpus[0].health.xid_count == 0


def test_an_xid_is_recent_for_ten_minutes_then_the_health_line_and_alert_let_go() -> None:
    fake = make_fake_nvml()
    wall = [1_764_666_000.0]
    clock = FakeClock()
    source, w = worker(fake, clock, wait_s=0.0, wall=lambda: wall[0])
    w.step()
    w.record_xid(0, 79)
    assert w.latest[0].xid_recent == 79
    assert w.latest[0].problems(wall[0] + 120) == ["XID 79 (GPU fallen off the bus) 2 min ago"]
    wall[0] += 599
    w.step()
    assert w.latest[0].xid_recent == 79
    wall[0] += 2
    w.step()
    source.close()
    assert (w.latest[0].xid_recent, w.latest[0].xid_last, w.latest[0].xid_count) == (0, 79, 1)
    assert w.latest[0].problems(wall[0]) == []


def test_a_gpu_that_cannot_report_xids_has_no_xid_fields() -> None:
    fake = make_fake_nvml(gpus=2)
    fake.gpus[0].xid_supported = False
    source = NvmlSource(nvml=fake, clock=FakeClock())
    gpus = source.poll(1000.2, ()).gpus
    source.close()
    assert gpus[0].health is not None and gpus[0].health.xid_count is None and gpus[0].health.xid_recent is None
    assert gpus[0].health.pcie_replays == 0
    assert gpus[1].health is not None and gpus[1].health.xid_count == 0


def test_without_event_sets_in_the_binding_health_is_still_read() -> None:
    fake = make_fake_nvml()
    fake.hide("nvmlEventSetWait_v2")
    health = health_of(fake)
    assert health.xid_count is None and health.memory_temperature_c == 45.0


def test_a_failing_event_wait_is_logged_once_and_does_not_spin(caplog: pytest.LogCaptureFixture) -> None:
    fake = make_fake_nvml()
    fake.inject("nvmlEventSetWait_v2", pynvml.NVML_ERROR_UNKNOWN)
    source = NvmlSource(nvml=fake, clock=FakeClock())
    assert source.health is not None
    source.health.wait_s = 0.05
    with caplog.at_level(logging.WARNING, logger="gpuwatch.sources.nvml"):
        time.sleep(0.5)
    source.close()
    assert 1 <= fake.calls["nvmlEventSetWait_v2"] <= 15  # ~ one wait per wait_s, not a busy loop
    assert len([r for r in caplog.records if "XID events failed" in r.getMessage()]) <= 1


def test_a_lost_gpu_keeps_the_health_it_had_so_its_xid_79_still_shows() -> None:
    fake = make_fake_nvml()
    source = NvmlSource(nvml=fake, clock=FakeClock())
    try:
        assert source.health is not None
        source.health.record_xid(0, 79)
        fake.lose_gpu(0)
        gpu = source.poll(1000.5, ()).gpus[0]
        again = source.poll(1001.0, ()).gpus[0]
    finally:
        source.close()
    assert gpu.lost and again.lost
    assert again.health is not None and again.health.xid_recent == 79


def test_the_worker_stops_within_its_wait_and_close_frees_the_event_set() -> None:
    fake = make_fake_nvml()
    fake.event_wait_cap_s = 10.0  # the fake blocks as long as asked, as NVML does
    source = NvmlSource(nvml=fake, clock=FakeClock())
    assert source.health is not None and source.health.wait_s == EVENT_WAIT_S == 0.5
    time.sleep(0.2)  # inside a wait
    started = time.monotonic()
    source.close()
    took = time.monotonic() - started
    assert took < EVENT_WAIT_S + 0.3
    assert fake.event_sets and all(es.freed for es in fake.event_sets)
    assert fake.refcount == 0


def test_an_event_set_that_stops_working_is_reopened_at_the_next_read_keeping_the_counts() -> None:
    fake = make_fake_nvml()
    clock = FakeClock()
    source, w = worker(fake, clock, interval=10.0, wait_s=0.0)
    w.step()
    fake.xid(0, 13)
    w.step()
    fake.inject("nvmlEventSetWait_v2", pynvml.NVML_ERROR_UNINITIALIZED, times=1)  # NVML re-initialised under us
    w.step()
    assert len(fake.event_sets) == 1
    clock.advance(10.0)
    w.step()  # the read reopens: a new set, the old one freed
    assert len(fake.event_sets) == 2 and fake.event_sets[0].freed and not fake.event_sets[1].freed
    fake.xid(0, 74)
    w.step()
    source.close()
    assert (w.latest[0].xid_count, w.latest[0].xid_last) == (2, 74)


def test_every_xid_queued_since_the_last_round_is_taken_in_one_round_without_blocking() -> None:
    fake = make_fake_nvml(gpus=2)
    fake.event_wait_cap_s = 10.0  # a wait with a timeout would block as long as asked
    clock = FakeClock()
    source, w = worker(fake, clock)
    w.step()
    for code in (13, 31, 43):
        fake.xid(1, code)
    started = time.monotonic()
    w.step()
    took = time.monotonic() - started
    source.close()
    assert (w.latest[1].xid_count, w.latest[1].xid_last) == (3, 43)
    assert took < 0.5 and fake.last_args["nvmlEventSetWait_v2"][1] == 0  # asked with no timeout


@pytest.mark.serial  # bounds wall time: measured alone, after the parallel part
def test_the_worker_wakes_once_per_xid_round_not_once_per_short_wait() -> None:
    fake = make_fake_nvml()
    fake.event_wait_cap_s = 10.0
    source = NvmlSource(nvml=fake, clock=FakeClock(), health_interval=0)
    w = HealthWorker(fake, [g.device for g in source.gpus], xid_poll_s=0.25)
    w.open_events()
    w.read_health()
    w.start()
    time.sleep(1.1)
    fake.xid(0, 48)  # queued: taken at the next round
    deadline = time.monotonic() + 0.25 + 0.3
    while time.monotonic() < deadline and not (w.latest[0].xid_count or 0):
        time.sleep(0.01)
    started = time.monotonic()
    stopped = w.stop()
    took = time.monotonic() - started
    source.close()
    assert w.latest[0].xid_last == 48
    rounds = fake.calls["nvmlEventSetWait_v2"] - 1  # the round that took the XID asked twice
    assert 3 <= rounds <= 7  # ~ one ask per 0.25 s round over ~1.3 s
    assert stopped and took < EVENT_WAIT_S  # the sleep between rounds ends at once, not after a wait


@pytest.mark.serial  # bounds wall time: measured alone, after the parallel part
def test_an_xid_reaches_the_snapshot_within_one_xid_round_of_two_seconds() -> None:
    fake = make_fake_nvml()
    fake.event_wait_cap_s = 10.0
    source = NvmlSource(nvml=fake, clock=FakeClock())
    try:
        time.sleep(0.1)  # past the first round
        fake.xid(0, 79)
        started = time.monotonic()
        while time.monotonic() - started < 5 and not (source.poll(1000.0, ()).gpus[0].health.xid_count or 0):  # type: ignore[union-attr]
            time.sleep(0.02)
        took = time.monotonic() - started
    finally:
        source.close()
    assert XID_POLL_S == 2.0 and took < XID_POLL_S + 0.5
