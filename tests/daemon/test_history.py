"""``GET /api/v1/history`` on a real daemon: the snapshots it keeps, oldest first, bounded, and one clear 400 for
a bad question; ``[sampler] history`` says how far back they reach."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest
import requests

from daemon.conftest import RunningDaemon
from daemon.incident import make_snapshot, write_recording
from gpuwatch.cli.daemon import options_from_config
from gpuwatch.config import Config
from gpuwatch.config.loader import load_config
from gpuwatch.daemon.app import HISTORY_LIMIT
from gpuwatch.model.codec import snapshot_from_dict
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.runtime.build import SamplingOptions, open_sampler
from gpuwatch.tui.remote import RemoteFeed


def history(url: str, query: str = "") -> list[Snapshot]:
    r = requests.get(f"{url}/api/v1/history{query}", timeout=10)
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson", r.text
    return [snapshot_from_dict(json.loads(line)) for line in r.text.splitlines()]


def test_history_serves_every_kept_snapshot_oldest_first_as_the_recording_has_them(running: RunningDaemon) -> None:
    running.wait_evaluated(120)
    kept = history(running.url)
    assert [dataclasses.replace(s, origin="live") for s in kept] == [make_snapshot(i, 120) for i in range(120)]


def test_since_until_and_limit_choose_a_slice_and_limit_keeps_the_newest(running: RunningDaemon) -> None:
    running.wait_evaluated(120)
    times = [s.time for s in history(running.url)]
    middle = history(running.url, f"?since={times[10]!r}&until={times[19]!r}")
    assert [s.time for s in middle] == times[10:20]  # both ends included
    assert [s.time for s in history(running.url, f"?since={times[10]!r}&limit=5")] == times[-5:]
    assert [s.time for s in history(running.url, f"?until={times[3]!r}")] == times[:4]
    assert history(running.url, f"?since={times[-1] + 1!r}") == []


@pytest.mark.parametrize(("query", "words"), [
    ("?since=yesterday", "since and until must be Unix times"), ("?limit=ten", "limit a whole number"),
    ("?since=nan", "since must be a time at or before until"), ("?since=20&until=10", "at or before until"),
    ("?limit=0", f"limit must be between 1 and {HISTORY_LIMIT}"), (f"?limit={HISTORY_LIMIT + 1}", "between 1 and")])
def test_a_bad_question_gets_400_and_one_line_saying_what_to_fix(running: RunningDaemon, query: str,
                                                                 words: str) -> None:
    r = requests.get(f"{running.url}/api/v1/history{query}", timeout=10)
    assert r.status_code == 400 and words in r.json()["error"], r.text


def test_sampler_history_in_the_config_sets_how_many_snapshots_the_daemon_keeps(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text('[sampler]\ninterval = 0.5\nhistory = "2m"\n')
    config = load_config(config_file, env={})
    assert config.sampler.history == 120.0
    args = argparse.Namespace(replay=write_recording(tmp_path / "r.ndjson.gz", n=10), speed=0.0, loop=False,
                              interval=None, dcgm=None, no_stacks=True)
    opened = open_sampler(options_from_config(config, args))
    assert opened.sampler.history.capacity == 240  # two minutes at one snapshot every 0.5 s
    opened.sampler.stop()
    assert Config().sampler.history == SamplingOptions().history_s == 600.0


def test_a_history_shorter_than_a_minute_is_refused_naming_the_key(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text('[sampler]\nhistory = "10s"\n')
    with pytest.raises(ValueError, match=r"history.*between 1m and 1d"):
        load_config(config_file, env={})


def test_a_connected_dashboard_fills_only_what_its_ring_lacks(running: RunningDaemon) -> None:
    """After a reconnection the ring has the older part: the daemon's newer snapshots follow, none twice."""
    running.wait_evaluated(120)
    served = history(running.url)
    feed = RemoteFeed([running.url])
    ring = feed.histories[running.url]
    for snap in served[:50]:
        ring.append(snap)
    feed._backfill(running.url)
    assert [s.time for s in ring] == [s.time for s in served]
    small = RemoteFeed([running.url], history_capacity=60)
    small._backfill(running.url)  # a ring of 60 asks for the newest 60
    assert [s.time for s in small.histories[running.url]] == [s.time for s in served[-60:]]
