"""Config values are one line of plain text: a receiver URL with CR/LF (which the HTTP library would drop,
sending the request elsewhere than the file says) or a name holding an ESC is refused with file:line, the
bad character shown, not rewritten. Ten thousand missing rule files are a few lines, not ten thousand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuwatch.alerts import RuleError, load_rules
from gpuwatch.config import ConfigError, load_config
from gpuwatch.model.errors import summarize

RECEIVER = '[[receivers]]\nname = "{name}"\nkind = "slack"\nurl = "{url}"\n'


@pytest.mark.parametrize(("name", "url", "line", "shown"), [
    ("ops", "http://example.com/hook\\r\\nX-Injected: 1", 4, "\\x0d\\x0a"),
    ("ops", "http://example.com/hook\\r\\n", 4, "\\x0d"),  # trailing: once silently stripped
    ("ops", "http://exam\\nple.com/", 4, "\\x0a"),
    ("ops", "http://example.com/\\u0085", 4, "\\x85"),
    ("o\\u001b[2Jps", "http://example.com/", 2, "\\x1b[2J"),
    ("o\\u001b]52;c;aGk=\\u0007", "http://example.com/", 2, "\\x07"),
    ("o\\tps", "http://example.com/", 2, "\\x09"),
])
def test_a_control_character_in_a_receiver_is_refused_with_file_line_and_shown(
        tmp_path: Path, name: str, url: str, line: int, shown: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(RECEIVER.format(name=name, url=url))
    with pytest.raises(ConfigError) as err:
        load_config(path, env={})
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: receivers[0].") and "control character" in message
    assert shown in message and "\x1b" not in message and "\r" not in message and "\n" not in message


def test_a_control_character_in_an_environment_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"GPUWATCH_DAEMON_STATE_DIR.*control character"):
        load_config(env={"XDG_CONFIG_HOME": str(tmp_path), "GPUWATCH_DAEMON_STATE_DIR": "/x\x1b[2J"})


def test_a_plain_receiver_is_still_taken_as_written(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(RECEIVER.format(name=" ops ", url="http://example.com/hook?a=1"))
    r = load_config(path, env={}).receivers[0]
    assert (r.name, r.url) == ("ops", "http://example.com/hook?a=1")


def test_ten_thousand_missing_rule_files_are_a_few_lines_then_counted(tmp_path: Path) -> None:
    paths = [tmp_path / f"r{i}.yml" for i in range(10_000)]
    with pytest.raises(RuleError) as err:
        load_rules(paths)
    assert len(err.value.errors) == 10_000
    lines = str(err.value).splitlines()
    assert lines == [f"{paths[0]}: no such file or directory", f"{paths[1]}: no such file or directory",
                     f"{paths[2]}: no such file or directory", "... and 9997 more like this"]


def test_different_problems_are_all_listed_and_each_repeated_kind_counted() -> None:
    messages = [f"a.yml:{i}: rule 'R{i}': missing 'condition'" for i in range(1, 6)] + ["b.yml: not valid YAML"]
    assert summarize(messages) == [*messages[:3], "... and 2 more like this", "b.yml: not valid YAML"]
    assert summarize(messages[:3]) == messages[:3]


def test_rules_check_on_ten_thousand_missing_files_prints_five_lines(tmp_path: Path) -> None:
    args = [str(tmp_path / f"r{i}.yml") for i in range(10_000)]
    done = subprocess.run([sys.executable, "-m", "gpuwatch", "rules", "check", *args], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines()[3:] == ["... and 9997 more like this",
                                            "gpuwatch: 10000 problems in the rule files"]
