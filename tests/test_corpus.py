"""Every file in the bad-input corpus (tests/corpus: config, rules, recordings, dcgm-exporter pages) ends in
one clear error: non-zero exit, a few short lines that name what is wrong, no traceback, within 30 s and a
gigabyte of address space."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus.cases import cases
from corpus.run import DEADLINE_S, run_case


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "name"), cases(), ids=[f"{k}/{n}" for k, n in cases()])
def test_each_bad_input_ends_in_one_clear_error(tmp_path: Path, kind: str, name: str) -> None:
    outcome = run_case(kind, name, tmp_path)
    assert not outcome.hung, f"still running after {DEADLINE_S} s"
    assert not outcome.traceback, outcome.output
    assert outcome.names_the_input, outcome.output
    assert outcome.clean, (outcome.returncode, outcome.output)
