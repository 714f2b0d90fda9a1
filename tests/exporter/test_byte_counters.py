"""Byte rates go out as counters: ``..._bytes_total`` adds up every Snapshot's rate over the time since the
previous one, once per Snapshot however often it is scraped, and a process that goes takes its total."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import requests
from daemon.conftest import RunningDaemon
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Config, DaemonConfig
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.model.snapshot import GpuSample, HostSample, Snapshot

GB = 1e9


def snap(t: float, rx: float, read: float | None = 2e6, pids: tuple[int, ...] = (7,)) -> Snapshot:
    gpu = GpuSample(index=0, uuid="GPU-0", name="NVIDIA H200", pcie_rx_bytes_s=rx, pcie_tx_bytes_s=rx / 2)
    procs = tuple(ProcessSample(pid=pid, gpu_index=0, name="python3", io_read_bytes_s=read) for pid in pids)
    return Snapshot(time=t, seq=int(t), gpus=(gpu,), processes=procs, host=HostSample(hostname="node"))


class Scraper:
    """A collector whose latest Snapshot the test sets, scraped like Prometheus would."""

    def __init__(self) -> None:
        self.latest: Snapshot | None = None
        self.exporter = Exporter(SnapshotCollector(lambda: self.latest))

    def scrape(self, snapshot: Snapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """The byte counters /metrics serves with ``snapshot`` as the latest, by (name, gpu and pid)."""
        self.latest = snapshot
        out = {}
        for fam in text_string_to_metric_families(render(self.exporter.registry).decode()):
            for s in fam.samples if fam.name.endswith("_bytes") else ():
                out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k in ("gpu", "pid"))))] = s.value
        return out


RX = ("gpuwatch_gpu_pcie_receive_bytes_total", (("gpu", "0"),))
TX = ("gpuwatch_gpu_pcie_transmit_bytes_total", (("gpu", "0"),))


def read_of(pid: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("gpuwatch_process_io_read_bytes_total", (("gpu", "0"), ("pid", str(pid))))


def test_the_total_is_the_rate_integrated_over_snapshot_time() -> None:
    s = Scraper()
    assert s.scrape(snap(100.0, 1 * GB))[RX] == 0.0  # counting starts when the GPU is first seen
    s.scrape(snap(101.0, 2 * GB))
    s.scrape(snap(103.0, 1 * GB))  # two seconds at 1 GB/s
    got = s.scrape(snap(103.5, 4 * GB))
    assert got[RX] == pytest.approx((2 + 2 + 2) * GB) and got[TX] == pytest.approx(3 * GB)
    assert got[read_of(7)] == pytest.approx(2e6 * 3.5)


def test_a_snapshot_scraped_twice_counts_once_and_a_missing_rate_adds_nothing() -> None:
    s = Scraper()
    s.scrape(snap(0.0, GB))
    first = s.scrape(snap(1.0, GB))
    assert s.scrape(snap(1.0, GB)) == first
    assert s.scrape(snap(2.0, GB, read=None))[read_of(7)] == pytest.approx(2e6)


def test_a_process_that_goes_takes_its_total_and_a_new_one_starts_at_zero() -> None:
    s = Scraper()
    s.scrape(snap(0.0, GB, pids=(7,)))
    s.scrape(snap(1.0, GB, pids=(7,)))
    gone = s.scrape(snap(2.0, GB, pids=(8,)))
    assert read_of(7) not in gone and gone[read_of(8)] == 0.0


@pytest.mark.slow
def test_the_daemon_adds_up_every_sampled_snapshot_not_only_the_scraped_ones(tmp_path: Path) -> None:
    path = tmp_path / "pcie.ndjson.gz"
    with RecordingWriter(path, RecordingHeader(created=0.0, interval_s=0.5, hostname="node")) as w:
        for i in range(41):  # 20 s of 1 GB/s, never scraped while it plays
            w.write(dataclasses.replace(snap(1000.0 + i * 0.5, GB), seq=i + 1))
    d = RunningDaemon(Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s"))), path)
    try:
        d.wait_evaluated(41)
        body = requests.get(d.url + "/metrics", timeout=5).text
    finally:
        d.stop()
    (line,) = [ln for ln in body.splitlines() if ln.startswith("gpuwatch_gpu_pcie_receive_bytes_total{")]
    assert float(line.split()[-1]) == pytest.approx(20 * GB)
