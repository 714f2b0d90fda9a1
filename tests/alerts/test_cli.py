"""``gpuwatch rules check|test|export|metrics`` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from alerts.incident import incident_trace
from gpuwatch.alerts import DEFAULT_RULES
from gpuwatch.cli.main import main
from gpuwatch.model.recording import RecordingHeader, RecordingWriter

TYPO = """groups:
  - name: mine
    rules:
      - alert: Typo
        condition:
          threshold: {metric: gpu.utilisation, op: "<", value: 30}
"""


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["rules", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "incident.ndjson.gz"
    with RecordingWriter(path, RecordingHeader(created=0.0, interval_s=1.0, hostname="h200-1")) as w:
        for snap in incident_trace():
            w.write(snap)
    return path


def test_check_passes_on_the_shipped_rules(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "check")
    assert code == 0 and out.startswith("OK: ") and "rules in 3 groups" in out
    assert cli(capsys, "check", str(DEFAULT_RULES.parent))[0] == 0


def test_check_fails_on_a_typo_naming_file_and_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "mine.yml"
    bad.write_text(TYPO)
    code, _, err = cli(capsys, "check", str(DEFAULT_RULES), str(bad))
    assert code == 1
    assert f"{bad}:6: rule 'Typo': threshold.metric: unknown metric 'gpu.utilisation' (did you mean" in err
    assert "gpuwatch: 1 problem in the rule files" in err
    assert "Traceback" not in err


def test_check_warns_about_labels_an_alert_never_has(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    odd = tmp_path / "odd.yml"
    odd.write_text("groups:\n  - name: g\n    rules:\n      - alert: Odd\n"
                   "        condition: {threshold: {metric: gpu.util, op: '<', value: 30}}\n"
                   "        annotations: {summary: '{{ $labels.pid }} on {{ $labels.gpu }}'}\n")
    code, _, err = cli(capsys, "check", str(odd))
    assert code == 0
    assert f"warning: {odd}:4: rule 'Odd': annotations.summary uses $labels.pid, which gpu alerts do not have" in err
    assert cli(capsys, "check")[2] == ""  # the shipped rules use only labels their alerts have


def test_check_from_the_real_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "mine.yml"
    bad.write_text(TYPO.replace("value: 30", "value: thirty"))
    res = subprocess.run([sys.executable, "-m", "gpuwatch", "rules", "check", str(bad)], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 1
    assert f"{bad}:6: rule 'Typo'" in res.stderr and "Traceback" not in res.stderr


def test_test_prints_the_timeline_of_a_recording(capsys: pytest.CaptureFixture[str], recording: Path) -> None:
    code, out, _ = cli(capsys, "test", "--replay", str(recording))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{recording}: 465 snapshots over 7m44s")
    assert any("+0:05:15" in ln and "firing" in ln and "GpuMemoryHeldWhileIdle" in ln for ln in lines)
    assert any("resolved  GpuMemoryHeldWhileIdle" in ln for ln in lines)


def test_test_json_prints_one_transition_per_line(capsys: pytest.CaptureFixture[str], recording: Path) -> None:
    code, out, _ = cli(capsys, "test", "--replay", str(recording), "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and rows
    assert {(r["alert"]["name"], r["alert"]["state"]) for r in rows} >= {("GpuMemoryHeldWhileIdle", "firing"),
                                                                          ("GpuMemoryHeldWhileIdle", "resolved")}


def test_test_with_custom_rules_and_bad_inputs(capsys: pytest.CaptureFixture[str], recording: Path,
                                               tmp_path: Path) -> None:
    quiet = tmp_path / "quiet.yml"
    quiet.write_text("groups:\n  - name: q\n    rules:\n      - alert: Never\n"
                     "        condition: {threshold: {metric: gpu.temperature_c, op: '>', value: 1000}}\n")
    code, out, _ = cli(capsys, "test", "--replay", str(recording), "--rules", str(quiet))
    assert code == 0 and "no alert went pending or firing" in out
    not_a_recording = tmp_path / "x.ndjson"
    not_a_recording.write_text("hello\n")
    code, _, err = cli(capsys, "test", "--replay", str(not_a_recording))
    assert code == 2 and "not a gpuwatch recording" in err


def test_export_writes_what_is_committed_and_lists_the_rest(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    code, out, err = cli(capsys, "export", "--format", "prometheus")
    generated = Path(__file__).resolve().parents[2] / "alerts" / "prometheus" / "gpuwatch-rules.yml"
    committed = generated.read_text(encoding="utf-8")
    assert code == 0 and out == committed and "not exported" not in err
    target = tmp_path / "rules.yml"
    assert cli(capsys, "export", "-o", str(target))[0] == 0
    assert target.read_text(encoding="utf-8") == committed
    local = tmp_path / "local.yml"
    local.write_text("groups:\n  - name: g\n    rules:\n      - alert: ClockLow\n"
                     "        condition: {threshold: {metric: gpu.sm_clock_percent, op: '<', value: 50}}\n")
    code, out, err = cli(capsys, "export", "--rules", str(local))
    assert code == 0 and "groups: []" in out
    assert f"not exported: ClockLow ({local}:4): metric 'gpu.sm_clock_percent' has no Prometheus series" in err


def test_metrics_lists_every_key_with_its_prometheus_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "metrics")
    assert code == 0
    assert any(ln.split()[:3] == ["gpu.util", "percent", "gpuwatch_gpu_utilization_ratio"] for ln in out.splitlines())
