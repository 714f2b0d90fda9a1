"""Well-formed hostile data (tests/corpus/cases_data.py): names that are not UTF-8 and clocks that do not move
forward are taken and served by every command that reads a recording (exit 0, no traceback, within the
corpus's time and memory limits, what could not be decoded shown visibly); a looping replay asked for a moment
years away answers at once; a peer that answers without end is cut with one clear line."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from corpus.cases_data import LOOP_AT, PEERS, SERVED, SERVED_COMMANDS, recording, snap
from corpus.run import Outcome, _env, run_one
from endless import EndlessServer
from hwm import peak_mib

#: Peak memory of one command on one case, at most.
MAX_RSS_MIB = 200.0


HWM = Path(__file__).parent / "hwm.py"


def run(kind: str, name: str, argv: list[str], workdir: Path, stdout: Path | None = None) -> Outcome:
    """One command, classified by the corpus's rules; its own peak memory (VmHWM) in ``max_rss_mib``."""
    hwm = workdir / "hwm"
    outcome = run_one(kind, name, [sys.executable, str(HWM), *argv], workdir,
                      {**_env(workdir), "HWM_FILE": str(hwm)}, name, str(stdout) if stdout else None)
    return dataclasses.replace(outcome, max_rss_mib=peak_mib(hwm) if hwm.exists() else outcome.max_rss_mib)


def served_ok(outcome: Outcome) -> None:
    assert not outcome.hung and not outcome.traceback, outcome.output
    assert outcome.returncode == 0, outcome.output
    assert outcome.max_rss_mib < MAX_RSS_MIB, f"{outcome.max_rss_mib:.0f} MiB"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SERVED))
@pytest.mark.parametrize("command", sorted(SERVED_COMMANDS))
def test_each_served_recording_is_taken_by_every_command(tmp_path: Path, name: str, command: str) -> None:
    case = SERVED[name]
    path = tmp_path / name
    path.write_bytes(case.make())
    out = tmp_path / "stdout"
    out.touch()
    argv = [a.replace("{r}", str(path)).replace("{d}", str(tmp_path)) for a in SERVED_COMMANDS[command]]
    outcome = run("served", name, argv, tmp_path, out)
    served_ok(outcome)
    printed = out.read_text(encoding="utf-8")  # strict: what a command prints is UTF-8
    if case.shows and command == "snapshot":
        assert case.shows in printed or json.dumps(case.shows)[1:-1] in printed, printed[:500]
    if case.says and command == "report":
        assert outcome.output.count(case.says) == 1, outcome.output
    if command == "record":
        (tmp_path / "out.ndjson.gz").read_bytes().decode("latin-1")  # written, and readable back:
        again = run("served", name, ["snapshot", "--json", "--replay", str(tmp_path / "out.ndjson.gz")], tmp_path)
        served_ok(again)


@pytest.mark.slow
@pytest.mark.parametrize("at", LOOP_AT)
def test_a_looping_replay_answers_a_moment_far_past_its_end_at_once(tmp_path: Path, at: str) -> None:
    path = tmp_path / "ten-seconds.ndjson.gz"
    path.write_bytes(recording(*(snap(1764666000.0 + i) for i in range(10))))
    out = tmp_path / "stdout"
    out.touch()
    outcome = run("loop", at, ["snapshot", "--json", "--replay", str(path), "--loop", "--at", at], tmp_path, out)
    served_ok(outcome)
    assert outcome.seconds < 20
    shown = json.loads(out.read_text())["time"] - 1764666000.0
    assert shown == pytest.approx(float(at) % 10.0, abs=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PEERS))
def test_a_peer_that_answers_without_end_is_cut_with_one_line(tmp_path: Path, name: str) -> None:
    newlines, argv = PEERS[name]
    server = EndlessServer(newlines=newlines)
    try:
        outcome = run("peer", name, [a.replace("{url}", server.url) for a in argv], tmp_path)
    finally:
        server.close()
    assert not outcome.hung and not outcome.traceback, outcome.output
    assert outcome.returncode not in (None, 0) and len(outcome.lines) == 1, outcome.output
    assert "sent more than" in outcome.output and server.url.split("//")[1] in outcome.output
    assert outcome.max_rss_mib < MAX_RSS_MIB
