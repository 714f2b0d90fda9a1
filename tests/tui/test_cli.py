"""``gpuwatch tui`` refuses what it cannot do in one line that says how to fix it, before taking the screen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuwatch.cli.common import CliError
from gpuwatch.cli.main import build_parser
from gpuwatch.cli.tui import build_feed
from gpuwatch.model.recording import iter_snapshots
from gpuwatch.tui.feed import LocalFeed
from gpuwatch.tui.remote import RemoteFeed


def parse(*argv: str) -> object:
    return build_parser().parse_args(["tui", *argv])


@pytest.mark.parametrize(("argv", "message"), [
    (("--connect", "127.0.0.1:19464", "--replay", "x.ndjson.gz"), "--connect and --replay exclude each other"),
    (("--connect", "--token-file", "/nonexistent/token"), "cannot read the token file"),
    (("--replay", "/nonexistent/rec.ndjson.gz"), "no such file"),
    (("--rules", "/nonexistent/rules.yml", "--replay", "x"), "alert rules not"),
])
def test_user_errors_name_the_problem_and_the_fix(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(CliError) as err:
        build_feed(parse(*argv))  # type: ignore[arg-type]
    assert message in str(err.value)


def test_connect_without_a_url_watches_the_local_daemon() -> None:
    feed = build_feed(parse("--connect"))  # type: ignore[arg-type]
    assert isinstance(feed, RemoteFeed) and feed.urls == ["http://127.0.0.1:19464"]


def test_replay_builds_a_recording_feed_with_the_shipped_rules(bundled: Path) -> None:
    feed = build_feed(parse("--replay", str(bundled)))  # type: ignore[arg-type]
    assert isinstance(feed, LocalFeed) and feed.mode == "recording" and feed.engine is not None
    feed.sampler.stop()


def test_without_a_terminal_it_says_so_and_exits_1(bundled: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gpuwatch", "tui", "--replay", str(bundled)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 1
    assert "needs a terminal" in done.stderr and "Traceback" not in done.stderr


def test_the_bundled_recording_opens_where_the_gpu_gets_busy(bundled: Path, recording: Path) -> None:
    """The idle lead-in is not played at all: nothing the screen does not show fills the doctor's window."""
    feed = build_feed(parse("--replay", str(bundled)))  # type: ignore[arg-type]
    assert isinstance(feed, LocalFeed) and not list(feed.sampler.history)
    first = feed.sampler.tick()
    lead = list(iter_snapshots(bundled))
    assert first is not None and (first.gpus[0].gpu_util or 0) >= 5
    skipped = [s for s in lead if s.time < first.time]
    assert len(skipped) > 5 and not any((s.gpus[0].gpu_util or 0) >= 5 for s in skipped)
    assert feed.description.endswith(f"h200-incident.ndjson.gz from {first.time - lead[0].time:.0f} s")
    assert list(feed.sampler.history) == [first]
    feed.sampler.stop()
    other = build_feed(parse("--replay", str(recording)))  # type: ignore[arg-type]
    assert isinstance(other, LocalFeed) and not list(other.sampler.history) and "from" not in other.description
    other.sampler.stop()


def test_the_diagnosis_window_reaches_the_local_doctor_and_the_daemon(bundled: Path) -> None:
    local = build_feed(parse("--replay", str(bundled), "--diagnosis-window", "10"))  # type: ignore[arg-type]
    default = build_feed(parse("--replay", str(bundled)))  # type: ignore[arg-type]
    remote = build_feed(parse("--connect", "--diagnosis-window", "45"))  # type: ignore[arg-type]
    assert isinstance(local, LocalFeed) and local.diagnosis_window_s == 10.0
    assert isinstance(default, LocalFeed) and default.diagnosis_window_s == 30.0
    assert isinstance(remote, RemoteFeed) and remote.diagnosis_path == "diagnosis?window=45"
    local.prime(40)
    findings = local.diagnose_now().findings
    local.sampler.stop()
    default.sampler.stop()
    assert findings and all(f.since is not None for f in findings)
