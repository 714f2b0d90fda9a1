"""``gpuwatch report``: the funnel, lost GPU-hours by cause and owner and the top fix, over a recording
here and from a real daemon's roll-ups, as text, JSON and CSV; and the capacity headroom against the band."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from efficiency.expected import FAULTS, expected_seconds
from efficiency.test_daemon import start, wait_for
from gpuwatch.cli.main import main
from gpuwatch.data import bundled_recording
from gpuwatch.efficiency.rows import HistKey, HistRow
from gpuwatch.efficiency.summary import headroom

LAUNCH = FAULTS / "launch_bound.ndjson.gz"


def test_the_text_report_names_the_cause_its_owner_and_the_doctors_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--replay", str(LAUNCH)]) == 0
    out = capsys.readouterr().out
    want = expected_seconds(LAUNCH)
    assert f"{want['allocated'] / 3600:.3f} GPU-h" in out
    assert "Lost GPU-hours by cause\n  launch_bound" in out
    assert "Lost GPU-hours by owner\n  root:python3" in out
    assert "Top fix, for the biggest loss (launch_bound" in out and "CUDA graphs" in out


def test_json_and_csv_carry_the_same_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--replay", str(LAUNCH), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    want = expected_seconds(LAUNCH)
    assert report["gpu_hours"]["effective"] == pytest.approx(want["effective"] / 3600, abs=1e-6)
    assert report["top_fix"]["cause"] == "launch_bound"
    assert main(["report", "--replay", str(LAUNCH), "--csv", "--by", "cause"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["cause", "lost_gpu_hours", "share_of_lost"]
    assert rows[1][0] == "launch_bound" and float(rows[1][1]) == pytest.approx(want["lost"] / 3600, abs=1e-5)


@pytest.mark.slow
def test_the_report_reads_a_live_daemons_rollups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gw = start(tmp_path, FAULTS / "idle_memory.ndjson.gz")
    try:
        wait_for(gw.url, expected_seconds(FAULTS / "idle_memory.ndjson.gz")["observed"])
        assert main(["report", "--connect", gw.url, "--since", "7d", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert [r["cause"] for r in report["lost_gpu_hours"]["cause"]] == ["memory_idle"]
        assert report["source"].startswith(f"daemon {gw.url}")
    finally:
        gw.kill()


def test_no_daemon_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--connect", "http://127.0.0.1:9"]) == 1
    assert "no gpuwatch daemon answers" in capsys.readouterr().err


@pytest.mark.parametrize(("bin_", "verdict"), [(18, "above the band"), (15, "in the healthy band"),
                                                (8, "below the band")])
def test_headroom_is_judged_on_the_90th_percentile_against_the_70_to_85_band(bin_: int, verdict: str) -> None:
    hist = [HistRow(HistKey(0, 0, 2), 5.0), HistRow(HistKey(0, 0, bin_), 95.0)]  # 95 % of the time in bin_
    h = headroom(hist)
    assert h is not None and h.sm_active == (bin_ + 1) * 5 and verdict in h.verdict


@pytest.mark.parametrize(("efficiency", "top_loss", "replica"), [
    (38.8, "input_cpu_bound", False),  # busy only at its peaks, starved on the whole: fix the cause first
    (75.0, "input_cpu_bound", True),  # in the band on the whole: the busiest tenth is real pressure
    (38.8, None, True),  # nothing lost to a cause
])
def test_headroom_never_advises_a_replica_against_the_top_loss(efficiency: float, top_loss: str | None,
                                                               replica: bool) -> None:
    hist = [HistRow(HistKey(0, 0, 6), 80.0), HistRow(HistKey(0, 0, 18), 20.0)]  # p90 in the 90-95 % bin: above the band
    h = headroom(hist, top_loss=top_loss, efficiency=efficiency)
    assert h is not None and h.sm_active == 95 and "above the band" in h.verdict
    assert ("add a replica" in h.verdict) == replica
    if not replica:
        assert f"{efficiency:.1f} %" in h.verdict and f"{top_loss}: fix that first" in h.verdict
    assert "over 1.7 min of allocated time" in h.line  # the 100 s it stands on, said


def test_the_bundled_recordings_report_says_one_thing_about_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--replay", str(bundled_recording()), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    top, room = out["top_fix"]["cause"], out["headroom"]
    assert top == "input_cpu_bound" and out["efficiency_percent"] < 70
    assert "add a replica" not in room["verdict"] and top in room["verdict"]
    assert room["allocated_seconds"] == pytest.approx(out["gpu_hours"]["allocated"] * 3600, rel=0.05)


@pytest.mark.slow
def test_compare_baseline_against_a_live_daemons_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recording = FAULTS / "idle_memory.ndjson.gz"
    gw = start(tmp_path, recording, speed="1")
    try:
        assert main(["compare", "--baseline", str(recording), "--connect", gw.url, "--for", "4", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["new"] == f"live {gw.url}" and out["regression"] is False
        rows = {r["metric"]: r for r in out["rows"]}
        assert rows["mem_peak_gib"]["verdict"] == "same" and rows["gpu_util"]["verdict"] == "same"
        assert out["top_finding"] == {"base": "memory_idle", "new": "memory_idle"}
    finally:
        gw.kill()


@pytest.mark.slow
@pytest.mark.parametrize("speed", ["25", "0"])
def test_a_daemon_replaying_a_recording_charges_what_report_replay_charges(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], speed: str) -> None:
    """One recording, one lost-by-cause table: the daemon's accounting (with its live doctor evaluated
    beside it, at a pace where that evaluation keeps up and at full speed) and ``report --replay``."""
    recording = tmp_path / "incident.ndjson.gz"  # the bundled recording's samples, all of them: a copy is played
    shutil.copyfile(bundled_recording(), recording)  # from its start (the demo itself skips its idle lead-in)
    assert main(["report", "--replay", str(recording), "--json"]) == 0
    offline = json.loads(capsys.readouterr().out)
    gw = start(tmp_path, recording, speed=speed)
    try:
        wait_for(gw.url, expected_seconds(recording)["observed"], timeout=60.0)
        assert main(["report", "--connect", gw.url, "--since", "7d", "--json"]) == 0
        daemon = json.loads(capsys.readouterr().out)
    finally:
        gw.kill()
    table = {by: {r[by]: pytest.approx(r["gpu_hours"], abs=1e-6) for r in rows}
             for by, rows in offline["lost_gpu_hours"].items() if by != "hour"}
    assert len(table["cause"]) > 1  # the recording loses time to more than one cause
    assert {by: {r[by]: r["gpu_hours"] for r in rows} for by, rows in daemon["lost_gpu_hours"].items()
            if by != "hour"} == table
