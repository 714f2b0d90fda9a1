"""``gpuwatch compare BASE NEW`` as a CI gate does not pass on nothing: a NEW run with no samples, with no
GPU in its samples, or far shorter than BASE fails with the reason said; an empty BASE is bad input. A NEW
that is the same run as BASE passes."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from gpuwatch.cli.main import main
from gpuwatch.model.recording import RecordingHeader, RecordingWriter, load
from gpuwatch.model.snapshot import Snapshot

BUNDLED = Path(__file__).resolve().parents[2] / "gpuwatch" / "data" / "h200-incident.ndjson.gz"


def _write(path: Path, snaps: list[Snapshot]) -> Path:
    with RecordingWriter(path, RecordingHeader(created=time.time(), interval_s=1.0)) as w:
        for s in snaps:
            w.write(s)
    return path


@pytest.fixture(scope="module")
def base() -> list[Snapshot]:
    return load(BUNDLED)


def test_the_same_run_twice_passes_the_gate(base: list[Snapshot], tmp_path: Path) -> None:
    assert main(["compare", "--no-chart", str(BUNDLED), str(_write(tmp_path / "new.ndjson.gz", base))]) == 0


@pytest.mark.parametrize(("case", "reason"), [
    ("empty", "holds no samples"),
    ("gpu-less", "no GPU in any of them"),
    ("two-samples", "at least 3 are needed"),
    ("a-tenth", "under a quarter of BASE"),
])
def test_a_new_run_that_measured_too_little_fails_the_gate_with_the_reason(
        base: list[Snapshot], tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str,
        reason: str) -> None:
    snaps = {"empty": [], "gpu-less": [dataclasses.replace(s, gpus=()) for s in base],
             "two-samples": base[:2], "a-tenth": base[: len(base) // 10]}[case]
    new = _write(tmp_path / f"{case}.ndjson.gz", snaps)
    assert main(["compare", "--no-chart", str(BUNDLED), str(new)]) == 1
    err = capsys.readouterr().err
    assert "REGRESSION" in err and reason in err and new.name in err
    assert main(["compare", "--json", str(BUNDLED), str(new)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["regression"] is True and reason in out["reason"]


def test_an_empty_base_is_bad_input(base: list[Snapshot], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = _write(tmp_path / "empty.ndjson.gz", [])
    assert main(["compare", str(empty), str(BUNDLED)]) == 2
    assert "BASE empty.ndjson.gz holds no samples" in capsys.readouterr().err
