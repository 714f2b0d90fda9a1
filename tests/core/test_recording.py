"""Recordings: write Snapshots, read them back; survive a crash mid-write; name file:line on bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from core.factories import full_snapshot
from gpuwatch.model.recording import RecordingError, RecordingHeader, RecordingWriter, load, read_header


def _write(path: Path, n: int = 5) -> None:
    with RecordingWriter(path, RecordingHeader(created=1.0, interval_s=0.5, description="test")) as w:
        for i in range(n):
            w.write(full_snapshot(t=100.0 + i * 0.5, seq=i + 1))


@pytest.mark.parametrize("name", ["trace.ndjson.gz", "trace.ndjson"])
def test_snapshots_come_back_equal_and_in_order(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    _write(path)
    snaps = load(path)
    assert [s.seq for s in snaps] == [1, 2, 3, 4, 5]
    assert snaps[2] == full_snapshot(t=101.0, seq=3)
    assert read_header(path).interval_s == 0.5


def test_a_line_cut_off_by_a_crash_is_skipped_and_the_rest_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    _write(path)
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # the writer died in the middle of the last line
    assert len(load(path)) == 4


def test_a_gzip_stream_cut_off_keeps_the_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson.gz"
    _write(path, n=50)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    snaps = load(path)
    assert 0 < len(snaps) < 50


def test_a_bad_line_is_reported_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.ndjson"
    _write(path, n=3)
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = "{not json}\n"
    path.write_text("".join(lines))
    with pytest.raises(RecordingError, match=r"t\.ndjson:3: not JSON|t\.ndjson:3:"):
        load(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "not a gpuwatch recording"), (b'{"time": 1}\n', "not a gpuwatch recording"),
     (gzip.compress(b"garbage", mtime=0), "not a gpuwatch recording")],  # mtime 0: one id in every worker
)
def test_a_file_that_is_not_a_recording_says_so(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / ("x.gz" if content[:2] == b"\x1f\x8b" else "x.ndjson")
    path.write_bytes(content)
    with pytest.raises(RecordingError, match=message):
        read_header(path)


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="no such file"):
        read_header(tmp_path / "nope.ndjson.gz")
