"""Without a GPU every command that reads samples either plays the bundled recording, labelled as one, or
names it: ``--replay bundled`` works wherever gpuwatch is installed (a clone, a venv, ``--user``, pipx), and
a refusal prints the installed path."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwatch.data import BUNDLED_ALIAS, bundled_recording, replay_path
from gpuwatch.model.recording import load

BUNDLED = bundled_recording()


def _gpuwatch(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # run from an empty directory: a relative gpuwatch/data/... would not resolve there
    return subprocess.run([sys.executable, "-m", "gpuwatch", *argv], capture_output=True, text=True, timeout=90,
                          cwd=cwd, stdin=subprocess.DEVNULL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_alias_is_the_installed_recording_and_any_other_word_a_file() -> None:
    assert replay_path(BUNDLED_ALIAS) == BUNDLED and BUNDLED.is_file()
    assert replay_path("bundled.ndjson.gz") == Path("bundled.ndjson.gz")


@pytest.mark.parametrize("command", [
    ["snapshot"],
    ["record", "-o", "x.ndjson.gz", "--duration", "1"],
    ["report", "--connect", "http://127.0.0.1:{port}"],
])
def test_a_refusal_names_the_alias_and_the_installed_path(command: list[str], tmp_path: Path) -> None:
    argv = [a.format(port=_free_port()) for a in command]
    done = _gpuwatch(*argv, cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "'--replay bundled' plays the H200 recording shipped with gpuwatch" in done.stderr, done.stderr
    assert f"gpuwatch, {BUNDLED})" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_snapshot_plays_the_bundled_recording_by_its_alias_and_says_it_is_one(tmp_path: Path) -> None:
    done = _gpuwatch("snapshot", "--replay", "bundled", "--at", "60", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    assert snap["origin"] == f"recording:{BUNDLED.name}"
    assert {p["pid"] for p in snap["processes"]} == {p.pid for p in load(BUNDLED)[60].processes}


def test_report_accounts_the_bundled_recording_by_its_alias(tmp_path: Path) -> None:
    done = _gpuwatch("report", "--replay", "bundled", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["source"] == f"recording {BUNDLED.name}"


def test_record_cuts_a_piece_of_the_bundled_recording_by_its_alias(tmp_path: Path) -> None:
    done = _gpuwatch("record", "--replay", "bundled", "--from", "10", "--to", "13", "-o", "piece.ndjson.gz",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    start = load(BUNDLED)[0].time
    piece = load(tmp_path / "piece.ndjson.gz")
    assert piece and all(10 <= s.time - start <= 13 for s in piece)


def test_doctor_says_it_reads_the_bundled_recording_with_no_log_line_first(tmp_path: Path) -> None:
    done = _gpuwatch("doctor", "--duration", "2", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert done.stdout.startswith("gpuwatch doctor - recording (no NVIDIA driver here): h200-incident.ndjson.gz")
    assert done.stderr == ""
