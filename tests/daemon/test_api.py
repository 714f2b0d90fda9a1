"""The daemon's HTTP API on a real socket: what each endpoint serves, and who may change state."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import requests
from tools import require_tool

from daemon.conftest import RunningDaemon
from daemon.incident import make_snapshot, write_recording, write_rules
from gpuwatch.config import AlertsConfig, Config, DaemonConfig
from gpuwatch.daemon.parts import StartError
from gpuwatch.model.codec import snapshot_from_dict


def test_healthz_reports_ticks_once_snapshots_flow(running: RunningDaemon) -> None:
    running.wait_evaluated(120)
    r = requests.get(running.url + "/healthz", timeout=5)
    assert r.status_code == 200
    assert r.json()["ticks"] == 120 and r.json()["sampler"] == "finished"


def test_healthz_says_how_far_behind_the_accounting_is(running: RunningDaemon) -> None:
    running.wait_evaluated(120)
    deadline = time.monotonic() + 15
    while (info := requests.get(running.url + "/healthz", timeout=5).json())["efficiency_backlog"]:
        assert time.monotonic() < deadline, info
        time.sleep(0.05)
    assert info["efficiency_dropped"] == 0  # a replay waits for the accounting: nothing lost


def test_snapshot_is_the_latest_one_in_the_lossless_json_form(running: RunningDaemon) -> None:
    running.wait_evaluated(120)
    snap = snapshot_from_dict(requests.get(running.url + "/api/v1/snapshot", timeout=5).json())
    expected = make_snapshot(119, 120)
    assert snap.seq == 120 and snap.origin == "recording:incident.ndjson.gz"
    assert dataclasses.replace(snap, origin="live") == expected


def test_metrics_scrape_is_clean_under_promtool(running: RunningDaemon) -> None:
    promtool = require_tool("promtool")
    body = requests.get(running.url + "/metrics", timeout=5).content
    assert re.search(rb'^gpuwatch_gpu_utilization_ratio\{[^}]*\bgpu="0"', body, re.M)
    assert b"gpuwatch_sampler_tick_duration_seconds_count" in body
    assert b'gpuwatch_notifications' in body
    check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=30, check=False)
    assert check.returncode == 0 and not check.stdout and not check.stderr, check.stdout + check.stderr
    assert b"_created" not in body  # prometheus_client's creation-time series are off


def test_the_root_is_a_page_linking_every_read_endpoint(running: RunningDaemon) -> None:
    page = requests.get(running.url + "/", timeout=5)
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    links = re.findall(r'href="([^"]+)"', page.text)
    assert links == ["metrics", "healthz", "api/v1/snapshot", "api/v1/stream", "api/v1/alerts", "api/v1/diagnosis",
                     "api/v1/history"]
    for link in links:
        if link != "api/v1/stream":  # a stream never ends
            assert requests.get(f"{running.url}/{link}", timeout=5).status_code == 200, link


@pytest.mark.parametrize("recovers", [False, True])
def test_alerts_fire_on_the_replayed_incident_and_resolve_after_it(tmp_path: Path, recovers: bool) -> None:
    recording = write_recording(tmp_path / "r.ndjson.gz", n=120, recovers=recovers)  # starved from tick 30
    config = Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s")),
                    alerts=AlertsConfig(rule_paths=(str(write_rules(tmp_path / "rules.yml")),)))
    d = RunningDaemon(config, recording)
    try:
        d.wait_evaluated(120)
        alerts = requests.get(d.url + "/api/v1/alerts", timeout=5).json()["alerts"]
        metrics = requests.get(d.url + "/metrics", timeout=5).text
    finally:
        d.stop()
    state = "resolved" if recovers else "firing"
    assert {(a["name"], a["state"]) for a in alerts} == {("GpuStarved", state), ("ThreadCpuBound", state)}
    assert all(a["fired_at"] == 1_764_666_040.0 for a in alerts)  # tick 30 + for: 10s
    assert ('gpuwatch_alerts{alertname="GpuStarved",alertstate="firing"' in metrics) is not recovers


def test_stream_sends_one_ndjson_line_per_tick(base_config: Config, recording: Path) -> None:
    d = RunningDaemon(base_config, recording, speed=20.0)  # 20 ticks a second
    try:
        seqs = []
        with requests.get(d.url + "/api/v1/stream", stream=True, timeout=10) as r:
            assert r.headers["Content-Type"].startswith("application/x-ndjson")
            for line in r.iter_lines():
                seqs.append(json.loads(line)["seq"])
                if len(seqs) == 10:
                    break
    finally:
        d.stop()
    assert seqs == list(range(seqs[0], seqs[0] + 10))


def test_a_stalled_stream_client_neither_blocks_sampling_nor_grows_its_queue(tmp_path: Path) -> None:
    # 200 processes make ~100 kB snapshots: 20 MB in all, more than the socket buffers hold.
    recording = write_recording(tmp_path / "big.ndjson.gz", n=200, processes=200)
    # The server drops a client whose socket takes no byte for request_timeout: longer than this test stalls,
    # so what is measured is the hub's queue, not that timeout.
    config = Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s"), stream_queue=4,
                                        request_timeout=120.0))
    d = RunningDaemon(config, recording, speed=100.0)
    try:
        with requests.get(d.url + "/api/v1/stream", stream=True, timeout=10) as r:
            stream = r.iter_lines()
            first = json.loads(next(stream))["seq"]
            time.sleep(1.5)  # read nothing while the replay runs on
            deadline = time.monotonic() + 60
            while d.daemon.pipeline.received < 200:  # every snapshot sampled and offered to the stream
                assert time.monotonic() < deadline, f"only {d.daemon.pipeline.received} snapshots received"
                time.sleep(0.02)
            hub = d.daemon.pipeline.hub
            assert hub.clients == 1 and hub.dropped > 0  # the oldest were dropped for the stalled client
            assert all(q.qsize() <= 4 for q in hub._clients)
            assert json.loads(next(stream))["seq"] > first  # and it still reads on
    finally:
        d.stop()
    assert d.daemon.sampler.ticks == 200


def test_diagnosis_names_the_cpu_bound_serving_process_of_the_incident(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "r.ndjson.gz", n=120, recovers=False)  # starved from tick 30 on
    d = RunningDaemon(Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s"))), recording)
    try:
        d.wait_evaluated(120)
        recent = requests.get(d.url + "/api/v1/diagnosis?window=60", timeout=30).json()
        bad = requests.get(d.url + "/api/v1/diagnosis?pid=x", timeout=5)
    finally:
        d.stop()
    assert recent["snapshots"] == 61 and recent["window_s"] == 60
    top = recent["findings"][0]
    assert (top["code"], top["pid"], top["severity"]) == ("input_cpu_bound", 4000, "critical")
    assert bad.status_code == 400


@pytest.mark.parametrize(("token_file", "header", "status"), [
    (False, None, 403),  # no token configured: reload over HTTP is off
    (True, None, 401),
    (True, "Bearer wrong-token-wrong-token", 401),
    (True, "Bearer s3cret-token-0123456789", 200),
])
def test_reload_over_http_needs_the_bearer_token(tmp_path: Path, recording: Path, token_file: bool,
                                                 header: str | None, status: int) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token-0123456789\n")
    config = Config(daemon=DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "s"),
                                        token_file=str(token) if token_file else None))
    d = RunningDaemon(config, recording)
    try:
        r = requests.post(d.url + "/api/v1/reload", headers={"Authorization": header} if header else {}, timeout=5)
    finally:
        d.stop()
    assert r.status_code == status, r.text
    assert "s3cret" not in r.text


@pytest.mark.parametrize(("listen", "allow_remote", "token", "message"), [
    ("0.0.0.0:19464", False, False, "pass --allow-remote"),
    ("0.0.0.0:19464", True, False, "needs a token"),
    ("192.0.2.1:19464", True, False, "needs a token"),
])
def test_a_non_loopback_address_needs_allow_remote_and_a_token(tmp_path: Path, recording: Path, listen: str,
                                                               allow_remote: bool, token: bool,
                                                               message: str) -> None:
    from gpuwatch.daemon.runner import Daemon
    from gpuwatch.sampler.sampler import Sampler
    from gpuwatch.sources.replay import ReplayProducer

    config = Config(daemon=DaemonConfig(listen=listen, allow_remote=allow_remote, state_dir=str(tmp_path)))
    with pytest.raises(StartError, match=message):
        Daemon(config, Sampler(ReplayProducer(recording)), "r", True, reload_config=lambda: config)


@pytest.mark.parametrize(("listen", "token_for_reads", "guarded"), [
    ("127.0.0.1:0", None, False),  # loopback: reads are open
    ("127.0.0.1:0", True, True),
    ("0.0.0.0:0", None, True),  # reachable from other machines: reads need the token by default
    ("0.0.0.0:0", False, False),
])
def test_reads_need_the_token_on_a_remote_address_unless_opened(tmp_path: Path, recording: Path, listen: str,
                                                                token_for_reads: bool | None, guarded: bool) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token-0123456789")
    config = Config(daemon=DaemonConfig(listen=listen, allow_remote=True, token_file=str(token),
                                        token_for_reads=token_for_reads, state_dir=str(tmp_path / "s")))
    d = RunningDaemon(config, recording)
    try:
        plain = {p: requests.get(d.url + p, timeout=5).status_code for p in ("/metrics", "/api/v1/snapshot")}
        bearer = {"Authorization": "Bearer s3cret-token-0123456789"}
        with_token = requests.get(d.url + "/metrics", headers=bearer, timeout=5).status_code
        health = requests.get(d.url + "/healthz", timeout=5).status_code
    finally:
        d.stop()
    assert plain == ({"/metrics": 401, "/api/v1/snapshot": 401} if guarded else {"/metrics": 200,
                                                                                 "/api/v1/snapshot": 200})
    assert (with_token, health) == (200, 200)
