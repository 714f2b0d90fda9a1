"""One duration grammar: what a rule's ``for:`` accepts, the config file and the environment accept too."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwatch.alerts.loader import parse_rules
from gpuwatch.config import ConfigError, load_config
from gpuwatch.model.durations import parse_duration

GOOD = [("30s", 30), ("5m", 300), ("1h30m", 5400), ("500ms", 0.5), ("1d", 86400), ("2w", 1_209_600),
        ("2.5m", 150), ("1m30s", 90), (90, 90), ("90", 90), (" 4h ", 14400), (0.25, 0.25)]
BAD = ["", "m5", "5 m", "-1m", "5x", "5m1h", "1h1h", "1e999", "forever", True, None, [1], -1, float("nan"),
       float("inf"), "1" * 41]


@pytest.mark.parametrize(("text", "seconds"), GOOD)
def test_durations_read_like_prometheus_or_as_plain_seconds(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", BAD, ids=repr)
def test_bad_durations_are_refused_with_what_to_write(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_units_out_of_order_say_so() -> None:
    with pytest.raises(ValueError, match="units go largest first, each once"):
        parse_duration("30s1m")


def test_1h30m_works_in_a_rule_in_the_config_file_and_in_the_environment(tmp_path: Path) -> None:
    rules = parse_rules("""\
groups:
  - name: g
    rules:
      - alert: Hot
        condition: {threshold: {metric: gpu.temperature_c, op: ">", value: 85}}
        for: 1h30m
""", "r.yml")
    (rule,) = [r for g in rules.groups for r in g.rules]
    config = tmp_path / "config.toml"
    config.write_text('[notify]\nmax_age = "1h30m"\n[sources]\nkubelet_interval = "1m30s"\n')
    loaded = load_config(config, env={"GPUWATCH_ALERTS_RESOLVE_GRACE": "1h30m"})
    assert rule.for_s == loaded.notify.max_age == loaded.alerts.resolve_grace == 5400.0
    assert loaded.sources.kubelet_interval == 90.0


def test_the_config_quotes_a_bad_duration_with_file_line_and_the_grammar(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[notify]\n\nmax_age = "1h30"\n')
    with pytest.raises(ConfigError, match=r"config.toml:3: notify.max_age: '1h30' is not a duration; write e.g. "
                                          r"30s, 5m, 1h30m or a number of seconds"):
        load_config(config, env={})
