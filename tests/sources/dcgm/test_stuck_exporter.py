"""An exporter that drips its headers for ever, and a source that hangs outright: the scrape still ends
at its deadline, ``snapshot --dcgm`` exits, the daemon stops on SIGTERM, and no hung thread holds exit."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpuwatch.sources.dcgm import DcgmError, DcgmSource
from sources.dcgm.exporter import FakeExporter, fixture
from sources.dcgm.test_cli import gpuwatch


def test_a_scrape_whose_headers_drip_ends_at_the_deadline_and_the_source_recovers(exporter: FakeExporter) -> None:
    exporter.behave(mode="drip-headers", drip_s=0.05)
    source = DcgmSource(exporter.url, connect_timeout=0.5, read_timeout=0.4, total_timeout=1.0, jitter=0.0,
                        backoff_initial=0.01)
    started = time.monotonic()
    with pytest.raises(DcgmError, match="took over 1 s to answer"):
        source.fetch()
    assert time.monotonic() - started < 2.0
    exporter.serve(fixture("dcgm-exporter-sample.prom"))
    time.sleep(0.05)
    assert len(source.poll(0.0, ()).gpus or ()) == 2


def test_snapshot_dcgm_exits_with_one_line_against_a_dripping_exporter(exporter: FakeExporter) -> None:
    exporter.behave(mode="drip-headers", drip_s=0.05)
    started = time.monotonic()
    run = gpuwatch("snapshot", "--json", "--interval", "0.1", "--dcgm", exporter.url)
    took = time.monotonic() - started
    assert took < 15, took
    assert "Traceback" not in run.stderr


def test_the_daemon_stops_on_sigterm_while_its_exporter_drips(exporter: FakeExporter, tmp_path: Path) -> None:
    exporter.behave(mode="drip-headers", drip_s=0.05)
    config = tmp_path / "config.toml"
    config.write_text(f'[daemon]\nlisten = "127.0.0.1:0"\nstate_dir = "{tmp_path / "s"}"\n')
    log = tmp_path / "log"
    proc = subprocess.Popen([sys.executable, "-m", "gpuwatch", "daemon", "--config", str(config), "--dcgm",
                             exporter.url], stderr=log.open("wb"), stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while "serving on" not in log.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.1)
        time.sleep(1.0)  # a scrape is in flight, dripping
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(10)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert code == 0 and took < 5, (code, took)
    assert "Traceback" not in log.read_text()


def test_a_source_that_hangs_for_ever_does_not_keep_the_process_from_exiting() -> None:
    script = textwrap.dedent("""
        import threading
        from gpuwatch.sampler.collector import LiveCollector
        from gpuwatch.sources.base import Source

        class Hung(Source):
            name = "hung"
            deadline_s = 0.2
            def poll(self, now, pids):
                threading.Event().wait()  # a driver call that never returns

        c = LiveCollector([Hung()])
        print(c.collect().sources[0].state)
        c.close()
    """)
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert run.stdout.strip() == "stale" and run.returncode == 0, run.stderr
    assert time.monotonic() - started < 5
