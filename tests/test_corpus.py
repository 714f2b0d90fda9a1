"""The hostile-input corpus (tests/corpus): config files, rule files, recordings, dcgm-exporter pages and
misbehaving exporters, command lines with special files (/dev/zero, /dev/urandom, a FIFO, a directory),
outputs that cannot be written (/dev/full), bad flags and environment values, and raw HTTP requests to a
daemon. Every run ends in one clear error: non-zero exit, a few short lines that name what is wrong, no
traceback, within 30 s and a gigabyte of address space, and a peak resident memory under 200 MB. Valid input
whose text comes from outside (process names holding escape sequences) ends in exit 0 with none of it raw.
Each run is classified clean / traceback / hang / memory / escapes / accepted, and anything but clean
fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from corpus.cases import HTTP, cases
from corpus.forkserver import needs_fresh
from corpus.run import DEADLINE_S, MEMORY_BOUND_MIB, HttpDaemon, Outcome, run_case


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "name"), cases(), ids=[f"{k}/{n}" for k, n in cases()])
def test_each_bad_input_ends_in_one_clear_error(tmp_path: Path, kind: str, name: str) -> None:
    for outcome in run_case(kind, name, tmp_path):
        assert not outcome.hung, f"still running after {DEADLINE_S} s"
        assert not outcome.traceback, outcome.output
        assert not outcome.over_memory, f"peak RSS {outcome.max_rss_mib:.0f} MiB, over 200 MB"
        assert not outcome.raw_output, f"a raw control character was printed: {outcome.output!r}"
        assert not outcome.accepted, f"exit 0 for bad input: {outcome.output}"
        assert outcome.expect_ok or outcome.names_the_input, outcome.output
        assert outcome.clean, (outcome.returncode, outcome.output)


#: A case of each kind, and the runs a fork could get wrong: output that cannot be written, a variable, text
#: checked for raw control characters, a FIFO named by the environment, a misbehaving exporter.
FORKED_LIKE_FRESH = [("config", "backoff-zero.toml"), ("rules", "billion-laughs.yml"),
                     ("recordings", "bad-line-late.ndjson.gz"), ("dcgm", "binary.prom"),
                     ("dcgm-behaviours", "redirect-loop"), ("commands", "doctor-json-stdout-full"),
                     ("commands", "env-sampler_interval-nan"), ("commands", "escapes-shown-by-snapshot"),
                     ("commands", "config-env-fifo")]


def test_a_run_whose_environment_changes_how_python_starts_gets_a_fresh_interpreter() -> None:
    base = {"LANG": "C.UTF-8", "PATH": "/usr/bin"}
    assert not needs_fresh({**base, "GPUWATCH_SAMPLER_INTERVAL": "nan", "XDG_STATE_HOME": "/x"}, base)
    assert needs_fresh({**base, "PYTHONIOENCODING": "latin-1"}, base)
    assert needs_fresh({**base, "LANG": "C"}, base) and needs_fresh({**base, "LC_ALL": "C"}, base)
    assert needs_fresh({"PATH": "/usr/bin"}, base)  # a variable taken away counts too


def _same_for_both(output: str, workdir: Path) -> str:
    """A message less what differs between any two runs: the directory, the exporter's port, a retry delay."""
    output = output.replace(str(workdir), "{d}")
    return re.sub(r"127\.0\.0\.1:\d+|\d+(\.\d+)? s\b", "#", output)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "name"), FORKED_LIKE_FRESH, ids=[f"{k}/{n}" for k, n in FORKED_LIKE_FRESH])
def test_a_run_forked_from_the_warm_interpreter_ends_as_one_in_a_fresh_interpreter(
        tmp_path: Path, kind: str, name: str) -> None:
    """The corpus forks its runs from an interpreter that has imported gpuwatch (corpus/forkserver.py): the
    same exit status and the same message as a new ``python`` process, with the same limits."""
    assert (kind, name) in cases()
    ends = {}
    for how in ("warm", "fresh"):
        (tmp_path / how).mkdir()
        outcomes = run_case(kind, name, tmp_path / how, fresh=how == "fresh")
        ends[how] = [(o.returncode, o.hung, o.raw_output, _same_for_both(o.output, tmp_path / how))
                     for o in outcomes]
    assert ends["warm"] == ends["fresh"]
    assert all(rc is not None for rc, *_ in ends["warm"])


@pytest.mark.slow
def test_hostile_http_requests_get_4xx_or_an_answer_never_a_5xx_a_hang_or_a_traceback(tmp_path: Path) -> None:
    daemon = HttpDaemon(tmp_path)
    try:
        outcomes = {name: daemon.send(name) for name in sorted(HTTP)}
        alive = daemon.proc.poll() is None
        peak_mib = daemon.peak_rss_mib() if alive else 0.0
    finally:
        log = daemon.stop()
    assert alive, log
    assert 0 < peak_mib <= MEMORY_BOUND_MIB
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
    assert Outcome("config", "x.toml", 2, "gpuwatch: x.toml: bad\n", 0.1, 250.0, False).verdict == "memory"
    assert Outcome("config", "x.toml", 2, "x.toml\n", 0.1, 10.0, False, raw_output=True).verdict == "escapes"
    assert Outcome("commands", "x", 0, "", 0.1, 10.0, False, expect_ok=True).verdict == "clean"
    four = "gpuwatch: x.toml:1\nx.toml:2\nx.toml:3\n... and 9 more like this\n"
    assert run(1, four).verdict == "unclear" and Outcome("config", "x.toml", 1, four, 0.1, 10.0, False,
                                                          max_lines=4).verdict == "clean"
