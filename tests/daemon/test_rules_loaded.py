"""A daemon without rules says so: a warning at start, ``gpuwatch_rules_loaded 0`` on /metrics and a
warning in /healthz, so a misplaced rule file cannot leave a daemon that silently never alerts."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest
import requests

from daemon.conftest import RunningDaemon
from gpuwatch.config import Config


def _gauge(metrics: str, name: str) -> float:
    return next(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(name + " "))


def test_the_shipped_rules_are_loaded_and_counted(running: RunningDaemon) -> None:
    loaded = _gauge(requests.get(running.url + "/metrics", timeout=5).text, "gpuwatch_rules_loaded")
    health = requests.get(running.url + "/healthz", timeout=5).json()
    assert loaded >= 5 and health["rules"] == loaded and "warning" not in health


def test_a_daemon_with_zero_rules_says_so_at_start_on_metrics_and_in_healthz(
        base_config: Config, recording: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    empty = tmp_path / "rules.yml"
    empty.write_text("groups: []\n", encoding="utf-8")
    config = dataclasses.replace(base_config, alerts=dataclasses.replace(base_config.alerts,
                                                                         rule_paths=(str(empty),)))
    with caplog.at_level(logging.WARNING, logger="gpuwatch"):
        d = RunningDaemon(config, recording)
    try:
        assert any("no alert rules loaded from " + str(empty) in r.getMessage() for r in caplog.records)
        assert _gauge(requests.get(d.url + "/metrics", timeout=5).text, "gpuwatch_rules_loaded") == 0
        health = requests.get(d.url + "/healthz", timeout=5).json()
        assert health["rules"] == 0 and "no alert can fire" in health["warning"]
    finally:
        d.stop()


def test_check_config_warns_when_no_rule_would_be_evaluated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuwatch.cli.main import main

    empty = tmp_path / "rules.yml"
    empty.write_text("groups: []\n", encoding="utf-8")
    config = tmp_path / "config.toml"
    config.write_text(f'[alerts]\nrule_paths = ["{empty}"]\n[daemon]\nstate_dir = "{tmp_path}"\n', encoding="utf-8")
    assert main(["daemon", "--check-config", "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert " 0 rule(s)" in out and "warning: no alert rules loaded" in err
