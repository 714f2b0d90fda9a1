"""The sentences at the top of the screen: RECORDING banner and status line."""

from __future__ import annotations

import pytest
from synthetic import snapshot

from gpuwatch.tui.status import banner_text, status_line


@pytest.mark.parametrize(("description", "expected"), [
    ("recording (no NVIDIA driver here): h200-incident.ndjson.gz",
     "RECORDING: h200-incident.ndjson.gz (no NVIDIA driver here) — replayed, not live"),
    ("recording: night.ndjson.gz", "RECORDING: night.ndjson.gz — replayed, not live"),
])
def test_the_banner_names_the_recording_and_why_it_plays(description: str, expected: str) -> None:
    assert banner_text(description) == expected


@pytest.mark.parametrize(("kwargs", "expected", "absent"), [
    ({}, "h200-node-1 · 2026-12-02 10:00:05 UTC · live · 1 GPU · 3 proc", "PAUSED"),
    ({"paused": True}, "PAUSED (p resumes)", "tree"),
    ({"tree": True, "filter_text": "alice", "gpu_filter": 0}, "tree, GPU 0 only, filter 'alice'", "PAUSED"),
    ({"problem": "http://x: cannot connect"}, "cannot connect", "PAUSED"),
])
def test_the_status_line_says_where_when_and_how_the_table_is_shown(kwargs: dict, expected: str,
                                                                     absent: str) -> None:
    args = {"paused": False, "sort": "gmem", "reverse": True, "tree": False, "gpu_filter": None,
            "filter_text": "", **kwargs}
    text = status_line(snapshot(5), "live", **args).plain
    assert expected in text and absent not in text
