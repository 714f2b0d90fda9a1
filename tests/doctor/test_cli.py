"""``gpuwatch doctor`` on recordings: the synthetic incident, and the real H200 recording when it is there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from doctor.synthetic import Load, window
from gpuwatch.cli.main import main
from gpuwatch.data import bundled_recording
from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.model.recording import RecordingHeader, RecordingWriter, load

INCIDENT_NIGHT = Load(util=12, sm=5, occupancy=1, tensor=0, mem_percent=80, thread=99)


@pytest.fixture
def incident_recording(tmp_path: Path) -> Path:
    path = tmp_path / "night.ndjson.gz"
    with RecordingWriter(path, RecordingHeader(created=time.time(), interval_s=1.0)) as w:
        for snap in window(INCIDENT_NIGHT, n=30):
            w.write(snap)
    return path


def test_doctor_on_a_recording_prints_ranked_findings_with_fixes(incident_recording: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--replay", str(incident_recording)]) == 0
    out = capsys.readouterr().out
    assert "30 samples" in out
    assert out.index("Input pipeline CPU-bound") < out.index("Memory occupied but compute idle")
    assert "fix: Move preprocessing" in out


def test_doctor_json_reads_only_the_asked_duration_of_a_recording(incident_recording: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--replay", str(incident_recording), "--duration", "9", "--json", "--pid", "471"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["samples"] == 10 and doc["source"].startswith("recording")
    assert [f["code"] for f in doc["findings"]] == ["input_cpu_bound", "memory_idle"]


def test_doctor_on_a_missing_recording_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--replay", str(tmp_path / "nope.ndjson.gz")]) == 2
    assert "nope.ndjson.gz: no such file" in capsys.readouterr().err


@pytest.mark.skipif(not bundled_recording().exists(), reason="the H200 recording is not bundled yet")
def test_doctor_on_the_bundled_h200_recording_finds_the_incident() -> None:
    snaps = load(bundled_recording())
    findings = diagnose(snaps)
    assert findings, "the H200 recording should give at least one finding"
    for f in findings:
        assert f.evidence and f.fix
    # The recording replays the incident: some stretch of it is input-bound.
    stretches = [snaps[i:i + 30] for i in range(0, len(snaps), 30)]
    codes = {p.code for s in stretches if (p := top_problem(diagnose(s))) is not None}
    assert "input_cpu_bound" in codes or "memory_idle" in codes, codes


def test_without_a_gpu_the_doctor_reads_the_bundled_recording_once_and_exits(tmp_path: Path) -> None:
    """No NVIDIA library here: ``gpuwatch doctor`` with no flags must end (it once looped the recording
    forever, keeping every sample) and keep its memory bounded."""
    code = ("import re, sys; from gpuwatch.cli.main import main; rc = main(['doctor', '--json']); "  # VmHWM: this
            "print('RSS', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1], file=sys.stderr); "
            "sys.exit(rc)")  # process's peak (getrusage's ru_maxrss carries the forking pytest's over exec)
    env = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}  # nothing to load NVML from
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    rss_kib = int(done.stderr.split("RSS")[-1].split()[0])
    assert out["source"].startswith("recording") and out["samples"] == len(load(bundled_recording()))
    assert rss_kib < 150 * 1024, rss_kib
    assert out["findings"][0]["code"] == "input_cpu_bound"
