"""Daily use of the CLI: bare ``gpuwatch`` takes the dashboard's flags, --help says which commands fall back
to the bundled recording, ``snapshot --at`` past the end is an error, and ``record`` cuts a recording."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwatch.cli.main import build_parser, main, with_command
from gpuwatch.data import bundled_recording
from gpuwatch.model.recording import load, read_header

BUNDLED = bundled_recording()


@pytest.mark.parametrize(("argv", "expected"), [
    ([], ["tui"]),
    (["--replay", "F"], ["tui", "--replay", "F"]),
    (["-vv", "--replay", "F"], ["-vv", "tui", "--replay", "F"]),
    (["--connect"], ["tui", "--connect"]),
    (["snapshot", "--json"], ["snapshot", "--json"]),
    (["--help"], ["--help"]),
    (["--version"], ["--version"]),
    (["bogus"], ["bogus"]),
])
def test_bare_gpuwatch_is_the_dashboard_with_its_flags(argv: list[str], expected: list[str]) -> None:
    assert with_command(argv) == expected


def test_gpuwatch_replay_reaches_the_dashboard(tmp_path: Path) -> None:
    """Without a terminal the dashboard refuses with its own message: proof --replay was the dashboard's."""
    done = subprocess.run([sys.executable, "-m", "gpuwatch", "--replay", str(BUNDLED)], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert done.returncode == 1 and "the dashboard needs a terminal" in done.stderr, done.stderr


def test_help_says_which_commands_fall_back_to_the_bundled_recording() -> None:
    text = " ".join(build_parser().format_help().split())
    assert "the dashboard and 'doctor' play a bundled recording" in text
    assert "'snapshot', 'record' and 'daemon' say so and exit 2" in text


@pytest.mark.parametrize("command", ["snapshot", "record -o x.ndjson.gz --duration 1", "daemon"])
def test_commands_that_do_not_fall_back_say_so_and_exit_2(command: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gpuwatch", *command.split()], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and "no NVIDIA driver found" in done.stderr and "--replay FILE" in done.stderr


def test_snapshot_at_past_the_end_names_the_recordings_length(capsys: pytest.CaptureFixture[str]) -> None:
    snaps = load(BUNDLED)
    length = math.floor((snaps[-1].time - snaps[0].time) * 10) / 10
    assert main(["snapshot", "--replay", str(BUNDLED), "--speed", "0", "--at", "99999"]) == 2
    err = capsys.readouterr().err
    assert f"--at 99999: the recording is {length:.1f} s long ({len(snaps)} snapshots)" in err
    assert main(["snapshot", "--replay", str(BUNDLED), "--speed", "0", "--at", f"{length:.1f}", "--json"]) == 0
    assert f'"time": {snaps[-1].time}' in capsys.readouterr().out


@pytest.mark.parametrize("at", ["nan", "-5", "inf"])
def test_snapshot_at_must_be_a_finite_offset(at: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["snapshot", "--replay", str(BUNDLED), "--at", at])
    assert exit_.value.code == 2 and "--at: must be 0 or more seconds" in capsys.readouterr().err


def test_record_cuts_a_piece_out_of_a_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snaps = load(BUNDLED)
    t0 = snaps[0].time
    piece = tmp_path / "piece.ndjson.gz"
    assert main(["record", "--replay", str(BUNDLED), "--from", "60", "--to", "120", "-o", str(piece)]) == 0
    expected = [s for s in snaps if 60 <= s.time - t0 <= 120]
    assert [s.time for s in load(piece)] == [s.time for s in expected] and len(expected) > 30
    assert f"wrote {len(expected)} samples (60-120 s of {BUNDLED.name})" in capsys.readouterr().err
    header = read_header(piece)
    assert header.hostname == read_header(BUNDLED).hostname and header.meta["cut_span_s"] == [60, 120]
    by_duration = tmp_path / "d.ndjson.gz"
    assert main(["record", "--replay", str(BUNDLED), "--from", "60", "--duration", "60", "-o", str(by_duration)]) == 0
    assert [s.time for s in load(by_duration)] == [s.time for s in expected]


@pytest.mark.parametrize(("argv", "message"), [
    (["--from", "99999"], "nothing to cut"),
    (["--from", "50", "--to", "20"], "--to 20 must be later than --from 50"),
])
def test_record_cut_errors(argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.ndjson.gz"
    assert main(["record", "--replay", str(BUNDLED), *argv, "-o", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_from_without_replay_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record", "--from", "5", "-o", str(tmp_path / "x.ndjson.gz")]) == 2
    assert "--from and --to cut a recording: give --replay FILE" in capsys.readouterr().err
