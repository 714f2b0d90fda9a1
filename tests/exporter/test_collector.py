"""/metrics is built per scrape from the latest Snapshot, in base units, and lints clean."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest
from core.factories import full_process, full_snapshot
from prometheus_client.parser import text_string_to_metric_families
from tools import require_tool

from gpuwatch.data import bundled_recording
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model.alert import Alert, AlertState, fingerprint
from gpuwatch.model.clock_events import CLOCK_EVENT_BITS
from gpuwatch.model.recording import load
from gpuwatch.model.snapshot import GpuSample, Snapshot
from gpuwatch.sources.dcgm.convert import to_gpu_samples
from gpuwatch.sources.dcgm.parse import parse_body


def alert(name: str, labels: dict[str, str], state: AlertState) -> Alert:
    return Alert(name, fingerprint(labels), labels, {}, state)


def scrape(snap: Snapshot | None, alerts: tuple[Alert, ...] = (), cap: int = 256) -> dict[tuple, float]:
    exporter = Exporter(SnapshotCollector(lambda: snap, lambda: alerts, max_process_series=cap))
    body = render(exporter.registry).decode()
    out: dict[tuple, float] = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict[tuple, float], metric: str, **labels: str) -> float:
    hits = [v for (n, ls), v in samples.items() if n == metric and set(labels.items()) <= set(ls)]
    assert len(hits) == 1, f"{metric}{labels}: {len(hits)} series"
    return hits[0]


@pytest.mark.parametrize(("name", "labels", "expected"), [
    ("gpuwatch_gpu_utilization_ratio", {"gpu": "0"}, 0.97),  # percent -> ratio
    ("gpuwatch_gpu_utilization_ratio", {"gpu": "1"}, 0.03),
    ("gpuwatch_gpu_memory_used_bytes", {"gpu": "0"}, 1_782_579_200),
    ("gpuwatch_gpu_sm_clock_hertz", {"gpu": "0"}, 1950e6),  # MHz -> Hz
    ("gpuwatch_gpu_power_watts", {"gpu": "0", "name": "NVIDIA H200"}, 512.25),
    ("gpuwatch_gpu_energy_joules_total", {"gpu": "0"}, 4069.296),
    ("gpuwatch_gpu_sm_active_ratio", {"gpu": "0"}, 0.875),  # GPM preferred over DCGM
    ("gpuwatch_gpu_profiling_sm_active_ratio", {"gpu": "0", "source": "gpm"}, 0.875),
    ("gpuwatch_gpu_profiling_sm_active_ratio", {"gpu": "0", "source": "dcgm"}, 0.88),
    ("gpuwatch_gpu_clock_event_active", {"gpu": "0", "reason": "power_cap"}, 1),
    ("gpuwatch_gpu_clock_event_active", {"gpu": "0", "reason": "hw_thermal"}, 0),
    ("gpuwatch_process_top_thread_cpu_usage_ratio", {"pid": "471", "gpu": "0", "user": "svc",
                                                     "command": "python3"}, 0.997),
    ("gpuwatch_host_cpu_iowait_ratio", {}, 0.0025),
    ("gpuwatch_host_info", {"hostname": "gpu-node-1"}, 1),
    ("gpuwatch_source_up", {"source": "dcgm"}, 0),
    ("gpuwatch_source_up", {"source": "nvml"}, 1),
    ("gpuwatch_source_age_seconds", {"source": "dcgm"}, 4.5),
    ("gpuwatch_gpu_info", {"gpu": "0", "pod": "infer-0", "namespace": "serving"}, 1),
    ("gpuwatch_up", {}, 1),
    ("gpuwatch_gpu_memory_reserved_bytes", {"gpu": "0"}, 645_922_816),
    ("gpuwatch_gpu_pcie_link_width", {"gpu": "1"}, 16),
    ("gpuwatch_host_memory_available_bytes", {}, 115_964_116_992),
    ("gpuwatch_gpu_processes", {"gpu": "1"}, 1),
])
def test_series_carry_snapshot_values_in_base_units(name: str, labels: dict[str, str], expected: float) -> None:
    assert value(scrape(full_snapshot()), name, **labels) == pytest.approx(expected)


def test_the_host_name_is_a_label_of_the_info_series_only() -> None:
    """Prometheus's ``instance`` tells hosts apart; ``gpuwatch_host_info`` (and an ``_info`` series carrying a
    backend's own labels) says which name a host goes by."""
    samples = scrape(full_snapshot())
    with_hostname = {n for (n, ls) in samples if "hostname" in dict(ls)}
    assert with_hostname and all(n.endswith("_info") for n in with_hostname), with_hostname
    assert "gpuwatch_host_info" in with_hostname


def test_every_known_clock_event_reason_has_a_series_per_gpu() -> None:
    samples = scrape(full_snapshot())
    reasons = {dict(ls)["reason"] for (n, ls) in samples if n == "gpuwatch_gpu_clock_event_active"}
    assert reasons == {name for name, _ in CLOCK_EVENT_BITS.values()}
    assert sum(1 for (n, _) in samples if n == "gpuwatch_gpu_clock_event_active") == 2 * len(CLOCK_EVENT_BITS)


def test_alerts_are_exported_like_prometheus_ALERTS_pending_and_firing_only() -> None:
    alerts = (alert("GpuStarved", {"alertname": "GpuStarved", "gpu": "0", "severity": "warning"}, "firing"),
              alert("CpuBound", {"alertname": "CpuBound", "pid": "471"}, "pending"),
              alert("Old", {"alertname": "Old"}, "resolved"))
    samples = scrape(full_snapshot(), alerts)
    assert value(samples, "gpuwatch_alerts", alertname="GpuStarved", alertstate="firing", gpu="0") == 1
    assert value(samples, "gpuwatch_alerts", alertname="CpuBound", alertstate="pending", pid="471") == 1
    assert not [k for k in samples if k[0] == "gpuwatch_alerts" and ("alertname", "Old") in k[1]]


def test_process_series_are_capped_and_the_rest_counted_once_per_snapshot() -> None:
    procs = tuple(dataclasses.replace(full_process(1000 + i), gpu_memory_bytes=i * 1024) for i in range(10))
    snap = dataclasses.replace(full_snapshot(), processes=procs)
    exporter = Exporter(SnapshotCollector(lambda: snap, max_process_series=3))
    for _ in range(3):  # three scrapes of the same snapshot count its dropped processes once
        body = render(exporter.registry).decode()
    pids = {ls["pid"] for f in text_string_to_metric_families(body) for s in f.samples
            if s.name == "gpuwatch_process_gpu_memory_bytes" for ls in [s.labels]}
    assert pids == {"1009", "1008", "1007"}  # the largest GPU-memory holders stay
    assert 'gpuwatch_process_series_dropped_total{reason="cap"} 7.0' in body
    assert 'gpuwatch_process_series_dropped_total{reason="young"} 0.0' in body


def test_a_process_shows_once_it_has_run_the_minimum_age_and_the_young_are_counted() -> None:
    now = full_snapshot().time
    procs = (dataclasses.replace(full_process(1), create_time=now - 5),  # 5 s old
             dataclasses.replace(full_process(2), create_time=now - 31),
             dataclasses.replace(full_process(3), create_time=None))  # age unknown: counts as old
    snap = dataclasses.replace(full_snapshot(), processes=procs)
    body = render(Exporter(SnapshotCollector(lambda: snap, process_min_age=30)).registry).decode()
    pids = {s.labels["pid"] for f in text_string_to_metric_families(body) for s in f.samples
            if s.name == "gpuwatch_process_gpu_memory_bytes"}
    assert pids == {"2", "3"}
    assert 'gpuwatch_process_series_dropped_total{reason="young"} 1.0' in body


def test_a_process_that_exits_leaves_no_stale_series() -> None:
    snaps = [full_snapshot(seq=1), dataclasses.replace(full_snapshot(seq=2), processes=())]
    exporter = Exporter(SnapshotCollector(lambda: snaps[0]))
    assert 'pid="471"' in render(exporter.registry).decode()
    snaps.pop(0)
    assert 'pid="471"' not in render(exporter.registry).decode()


def test_before_the_first_snapshot_only_up_0_and_the_daemon_series_are_served() -> None:
    samples = scrape(None)
    assert value(samples, "gpuwatch_up") == 0
    assert not [k for k in samples if k[0].startswith("gpuwatch_gpu_")]


def test_tick_durations_fill_the_histogram() -> None:
    exporter = Exporter(SnapshotCollector(lambda: None))
    for s in (0.002, 0.004, 0.3):
        exporter.observe_tick(s)
    body = render(exporter.registry).decode()
    assert "gpuwatch_sampler_tick_duration_seconds_count 3.0" in body
    assert 'gpuwatch_sampler_tick_duration_seconds_bucket{le="0.005"} 2.0' in body


def test_a_scrape_is_clean_under_promtool_check_metrics() -> None:
    promtool = require_tool("promtool")
    alerts = (alert("GpuStarved", {"alertname": "GpuStarved", "gpu": "0", "app.kubernetes.io/name": "x"},
                        "firing"),)
    exporter = Exporter(SnapshotCollector(lambda: full_snapshot(), lambda: alerts))
    exporter.observe_tick(0.01)
    result = subprocess.run([promtool, "check", "metrics"], input=render(exporter.registry),
                            capture_output=True, timeout=30, check=False)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert result.stdout.decode().strip() == "" and result.stderr.decode().strip() == ""


@pytest.mark.parametrize("sample", ["dcgm-exporter-sample.prom", "dcgm-exporter-sample-h200-k8s.prom"])
def test_gpus_read_from_a_real_dcgm_exporter_body_export_cleanly(sample: str) -> None:
    promtool = require_tool("promtool")
    body_path = Path(__file__).resolve().parents[2] / "shared" / "reference" / sample
    if not body_path.exists():
        body_path = Path("/work/shared/reference") / sample
    if not body_path.exists():
        pytest.skip(f"{sample} not available here")
    gpus = to_gpu_samples(parse_body(body_path.read_text()))
    snap = dataclasses.replace(full_snapshot(), gpus=gpus, processes=())
    samples = scrape(snap)
    assert {dict(ls)["source"] for (n, ls) in samples if n.startswith("gpuwatch_gpu_profiling_")} <= {"dcgm"}
    exporter = Exporter(SnapshotCollector(lambda: snap))
    check = subprocess.run([promtool, "check", "metrics"], input=render(exporter.registry), capture_output=True,
                           timeout=30, check=False)
    assert check.returncode == 0 and not check.stdout and not check.stderr, check.stdout + check.stderr


def test_the_bundled_recording_exports_cleanly_at_every_step() -> None:
    promtool = require_tool("promtool")
    if not bundled_recording().exists():
        pytest.skip("the bundled recording is not in this checkout")
    snaps = load(bundled_recording())
    picked = [snaps[0], max(snaps, key=lambda s: len(s.processes)), snaps[-1]]
    for snap in picked:
        exporter = Exporter(SnapshotCollector(lambda snap=snap: snap))
        check = subprocess.run([promtool, "check", "metrics"], input=render(exporter.registry),
                               capture_output=True, timeout=30, check=False)
        assert check.returncode == 0 and not check.stdout and not check.stderr, check.stdout + check.stderr


def test_a_lost_gpu_is_exported_as_lost_with_its_identity_and_no_measurements() -> None:
    snap = full_snapshot()
    lost = GpuSample(index=1, uuid=snap.gpus[1].uuid, name=snap.gpus[1].name, lost=True)
    samples = scrape(dataclasses.replace(snap, gpus=(snap.gpus[0], lost)))
    assert value(samples, "gpuwatch_gpu_lost", gpu="1") == 1 and value(samples, "gpuwatch_gpu_lost", gpu="0") == 0
    assert not [k for k in samples if k[0] == "gpuwatch_gpu_power_watts" and ("gpu", "1") in k[1]]
