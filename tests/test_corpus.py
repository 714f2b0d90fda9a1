"""The hostile-input corpus (tests/corpus): config files, rule files, recordings, dcgm-exporter pages and
misbehaving exporters, command lines with special files (/dev/zero, /dev/urandom, a FIFO, a directory),
outputs that cannot be written (/dev/full), bad flags and environment values, and raw HTTP requests to a
daemon. Every run ends in one clear error: non-zero exit, a few short lines that name what is wrong, no
traceback, within 30 s and a gigabyte of address space. Each run is classified clean / traceback / hang /
accepted, and anything but clean fails."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus.cases import HTTP, cases
from corpus.run import DEADLINE_S, HttpDaemon, Outcome, run_case


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "name"), cases(), ids=[f"{k}/{n}" for k, n in cases()])
def test_each_bad_input_ends_in_one_clear_error(tmp_path: Path, kind: str, name: str) -> None:
    for outcome in run_case(kind, name, tmp_path):
        assert not outcome.hung, f"still running after {DEADLINE_S} s"
        assert not outcome.traceback, outcome.output
        assert not outcome.accepted, f"exit 0 for bad input: {outcome.output}"
        assert outcome.names_the_input, outcome.output
        assert outcome.clean, (outcome.returncode, outcome.output)


@pytest.mark.slow
def test_hostile_http_requests_get_4xx_or_an_answer_never_a_5xx_a_hang_or_a_traceback(tmp_path: Path) -> None:
    daemon = HttpDaemon(tmp_path)
    try:
        outcomes = {name: daemon.send(name) for name in sorted(HTTP)}
        alive = daemon.proc.poll() is None
    finally:
        log = daemon.stop()
    assert alive, log
    assert {n: o.verdict for n, o in outcomes.items() if o.verdict != "clean"} == {}
    assert "Traceback" not in log


def test_the_classifier_tells_each_kind_of_run_apart() -> None:
    """What the corpus counts: a traceback or an 'internal error' line is a bug even with a non-zero exit."""
    def run(rc: int | None, output: str, hung: bool = False) -> Outcome:
        return Outcome("config", "x.toml", rc, output, 0.1, 10.0, hung)

    assert run(2, "gpuwatch: x.toml:3: bad\n").verdict == "clean"
    assert run(1, "Traceback (most recent call last):\n  ...\nValueError: x.toml\n").verdict == "traceback"
    assert run(70, "gpuwatch: internal error: OverflowError: x.toml (this is a bug)\n").verdict == "traceback"
    assert run(None, "", hung=True).verdict == "hang"
    assert run(0, "").verdict == "accepted"
    assert run(1, "gpuwatch: something else\n").verdict == "unclear"  # does not name the input
    usage = "usage: gpuwatch doctor [-h]\n                [--json]\ngpuwatch doctor: error: argument --pid: x.toml\n"
    assert run(2, usage).verdict == "clean"  # argparse's usage block is not counted as lines
