"""End to end: health events injected through the fake NVML reach the shipped alert rules through the NVML
source, its health worker and the sampler's collector, with the XID's meaning in the summary."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from fakes.fake_pynvml import FakeNvml, make_fake_nvml

from gpuwatch.alerts import DEFAULT_RULES, AlertEngine, load_rules
from gpuwatch.model.alert import Alert
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sources.nvml import NvmlSource


@pytest.fixture
def live() -> Iterator[tuple[FakeNvml, LiveCollector]]:
    fake = make_fake_nvml(gpus=2)
    collector = LiveCollector([NvmlSource(nvml=fake, health_interval=0.05)], hostname="node-1")
    yield fake, collector
    collector.close()


def firing_when(collector: LiveCollector, engine: AlertEngine, done: Callable[[list[Alert]], bool],
                timeout: float = 5.0) -> list[Alert]:
    """Tick the collector into the engine until ``done(firing alerts)``."""
    deadline = time.monotonic() + timeout
    firing: list[Alert] = []
    while time.monotonic() < deadline:
        engine.evaluate(collector.collect())
        firing = [a for a in engine.alerts() if a.state == "firing"]
        if done(firing):
            break
        time.sleep(0.02)
    return firing


def test_an_xid_injected_through_nvml_fires_the_xid_alert_with_its_meaning(
        live: tuple[FakeNvml, LiveCollector]) -> None:
    fake, collector = live
    engine = AlertEngine(load_rules([DEFAULT_RULES]))
    assert firing_when(collector, engine, lambda a: False, timeout=0.2) == []  # healthy: nothing fires
    fake.xid(1, 79)
    firing = firing_when(collector, engine, lambda a: any(x.name == "GpuXidError" for x in a))
    xid = [a for a in firing if a.name == "GpuXidError"]
    assert len(xid) == 1
    assert xid[0].labels["gpu"] == "1" and xid[0].labels["severity"] == "critical"
    assert xid[0].annotations["summary"] == (
        f"GPU 1 ({fake.gpus[1].uuid}) reported XID 79 (GPU fallen off the bus)")


def test_row_remap_pending_and_failure_and_a_hot_hbm_fire_their_alerts(live: tuple[FakeNvml, LiveCollector]) -> None:
    fake, collector = live
    rules = load_rules([DEFAULT_RULES])
    engine = AlertEngine(rules)
    fake.gpus[0].remapped_rows = (4, 1, 1, 0)
    fake.gpus[1].remapped_rows = (0, 0, 0, 1)
    both = {"GpuRowRemapPending", "GpuRowRemapFailed"}
    firing = firing_when(collector, engine, lambda a: both <= {x.name for x in a})
    assert {(a.name, a.labels["gpu"]) for a in firing} >= {("GpuRowRemapPending", "0"), ("GpuRowRemapFailed", "1")}
    hot = rules.rule("GpuMemoryHot")
    assert hot is not None and hot.for_s == 120.0  # held for 2 minutes: checked without waiting for it
    fake.gpus[0].memory_temp = 93
    snap = collector.collect()
    deadline = time.monotonic() + 5
    while (snap.gpus[0].health is None or snap.gpus[0].health.memory_temperature_c != 93.0) \
            and time.monotonic() < deadline:
        time.sleep(0.02)
        snap = collector.collect()
    engine.evaluate(snap)
    assert [(a.name, a.state) for a in engine.alerts() if a.name == "GpuMemoryHot"] == [("GpuMemoryHot", "pending")]
