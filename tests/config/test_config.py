"""The TOML config: defaults, the file, GPUWATCH_* overrides, and errors that name file, line, key and fix."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from daemon.incident import write_recording

from gpuwatch.config import Config, ConfigError, default_config_path, load_config, override
from gpuwatch.config.example import render_example

GOOD = """\
[sampler]
interval = 0.5

[alerts]
rule_paths = ["rules/gpu.yml"]

[daemon]
listen = "127.0.0.1:9500"
token_file = "token"

[notify]
max_age = "2h"

[[receivers]]
name = "ops"
kind = "alertmanager"
url = "http://127.0.0.1:9093/hook"
secret_env = "OPS_SECRET"
repeat_interval = "30m"
group_by = ["alertname", "gpu"]
match = { severity = "critical" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_a_full_file_is_read_with_units_and_paths_relative_to_it(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, GOOD), env={})
    assert c.sampler.interval == 0.5 and c.notify.max_age == 7200.0
    assert c.daemon.listen == "127.0.0.1:9500" and c.daemon.token_file == str(tmp_path / "token")
    assert c.alerts.rule_paths == (str(tmp_path / "rules/gpu.yml"),)
    (r,) = c.receivers
    assert (r.name, r.kind, r.repeat_interval, r.group_by, r.match) == (
        "ops", "alertmanager", 1800.0, ("alertname", "gpu"), {"severity": "critical"})


def test_slack_and_alertmanager_api_receivers_need_no_secret_and_repeat_by_kind(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, """\
[[receivers]]
name = "chat"
kind = "slack"
url = "https://hooks.slack.com/services/T/B/X"
[[receivers]]
name = "am"
kind = "alertmanager_api"
url = "http://127.0.0.1:9093"
[[receivers]]
name = "am-fast"
kind = "alertmanager_api"
url = "http://127.0.0.1:9093"
repeat_interval = "1m30s"
"""), env={})
    chat, am, fast = c.receivers
    assert (chat.secret_file, chat.secret_env, chat.resend_s) == (None, None, 4 * 3600.0)
    assert (am.kind, am.resend_s, fast.resend_s) == ("alertmanager_api", 60.0, 90.0)


def test_no_file_at_the_default_path_means_defaults(tmp_path: Path) -> None:
    c = load_config(None, env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert c.daemon.listen == "127.0.0.1:19464" and c.path is None and c.receivers == ()


@pytest.mark.parametrize(("env", "expected"), [
    ({"XDG_CONFIG_HOME": "/x"}, "/x/gpuwatch/config.toml"),
    ({"GPUWATCH_CONFIG": "/etc/gpuwatch.toml", "XDG_CONFIG_HOME": "/x"}, "/etc/gpuwatch.toml"),
])
def test_default_path_follows_xdg_and_gpuwatch_config(env: dict[str, str], expected: str) -> None:
    assert str(default_config_path(env)) == expected


def test_environment_overrides_the_file_and_flags_override_both(tmp_path: Path) -> None:
    env = {"GPUWATCH_DAEMON_LISTEN": "127.0.0.1:9600", "GPUWATCH_SAMPLER_INTERVAL": "2",
           "GPUWATCH_DAEMON_ALLOW_REMOTE": "yes"}
    c = load_config(write(tmp_path, GOOD), env=env)
    assert (c.daemon.listen, c.sampler.interval, c.daemon.allow_remote) == ("127.0.0.1:9600", 2.0, True)
    assert override(c, "daemon", listen="127.0.0.1:9700").daemon.listen == "127.0.0.1:9700"


@pytest.mark.parametrize(("text", "message"), [
    ("[daemon]\nlisten = 19464\n", r"config.toml:2: daemon.listen: expected a non-empty string"),
    ('[daemon]\nlisten = "localhost"\n', r"config.toml:2: daemon.listen: 'localhost' is not HOST:PORT; write e.g."),
    ('[sampler]\n\ninterval = -1\n', r"config.toml:3: sampler.interval: must be greater than 0"),
    ('[daemon]\nlisten_addr = "x"\n', r"config.toml:2: daemon.listen_addr: unknown key; did you mean 'listen'\?"),
    ('[deamon]\n', r"config.toml:1: deamon: unknown section; did you mean \[daemon\]\?"),
    ('[notify]\nmax_age = "forever"\n', r"config.toml:2: notify.max_age: 'forever' is not a duration"),
    ("[daemon\n", r"config.toml:1: not valid TOML"),
    (GOOD + '\n[[receivers]]\nname = "pager"\nkind = "pagerduty"\nurl = "http://x"\n',
     r"config.toml:25: receivers\[1\].kind: 'pagerduty' is not one of: generic, alertmanager, slack, "
     r"alertmanager_api"),
    ('[[receivers]]\nname = "a"\nkind = "generic"\nurl = "http://x"\n',
     r"config.toml:1: receivers\[0\]: every webhook request is signed: set secret_file"),
    ('[[receivers]]\nname = "a"\nkind = "generic"\nurl = "http://x"\nsecret_env = "S"\nrepeat_interval = "30s"\n',
     r"config.toml:6: receivers\[0\].repeat_interval: a webhook repeats .* at most once a minute: "
     r"write 1m to 30d \(default 4h\), got 30s"),
    ('[[receivers]]\nname = "am"\nkind = "alertmanager_api"\nurl = "http://am:9093"\nsecret_env = "S"\n',
     r"config.toml:5: receivers\[0\].secret_env: Alertmanager checks no webhook signature: remove it"),
    ('[[receivers]]\nname = "am"\nkind = "alertmanager_api"\nurl = "http://am:9093"\nrepeat_interval = "5m"\n',
     r"config.toml:5: receivers\[0\].repeat_interval: Alertmanager ends a firing alert not sent again within its "
     r"resolve_timeout \(5m by default\): write 1s to 2m30s \(default 1m\), got 5m"),
    ('[[receivers]]\nname = "am"\nkind = "alertmanager_api"\nurl = "http://am:9093"\nsend_resolved = false\n',
     r"config.toml:5: receivers\[0\].send_resolved: an alertmanager_api receiver always ends resolved alerts"),
    ('[[receivers]]\nname = "a"\nkind = "slack"\n', r"config.toml:1: receivers\[0\]: missing url"),
    ('[[receivers]]\nname = "a"\nkind = "slack"\nurl = "ftp://x"\nsecret_env = "S"\n',
     r"config.toml:4: receivers\[0\].url: 'ftp://x' is not an http:// or https:// URL"),
])
def test_a_bad_file_names_file_line_key_and_the_fix(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text), env={})


def test_a_bad_environment_override_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"environment GPUWATCH_SAMPLER_.*interval: 'fast' is not a number"):
        load_config(None, env={"XDG_CONFIG_HOME": str(tmp_path), "GPUWATCH_SAMPLER_INTERVAL": "fast"})


def test_an_explicit_config_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "missing.toml", env={})


@pytest.mark.parametrize(("config", "extra", "message"), [
    ('[daemon]\nlisten = "127.0.0.1:x"\n', [], "daemon.listen: '127.0.0.1:x' is not HOST:PORT"),
    ("[alerts]\nrule_paths = [\"missing.yml\"]\n", [], "alert rules:"),
    ('[[receivers]]\nname = "a"\nkind = "slack"\nurl = "http://127.0.0.1:1"\nsecret_env = "GW_TEST_UNSET"\n', [],
     "receiver 'a': secret_env GW_TEST_UNSET: the environment variable is not set"),
    ("", ["--listen", "0.0.0.0:19464"], "pass --allow-remote"),
    ("", ["--listen", "0.0.0.0:19464", "--allow-remote"], "needs a token"),
])
def test_the_daemon_refuses_a_bad_config_with_one_line_and_exit_2(tmp_path: Path, config: str, extra: list[str],
                                                                   message: str) -> None:
    path = write(tmp_path, config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
    recording = write_recording(tmp_path / "r.ndjson.gz", n=3)
    # The real start, not only --check-config: it must refuse before serving anything.
    result = subprocess.run([sys.executable, "-m", "gpuwatch", "daemon", "--config", str(path), "--replay",
                             str(recording), "--state-dir", str(tmp_path / "s"), *extra],
                            capture_output=True, text=True, timeout=60, env=env, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.startswith("gpuwatch: ")


def test_check_config_summarises_a_good_config(tmp_path: Path) -> None:
    path = write(tmp_path, f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n')
    result = subprocess.run([sys.executable, "-m", "gpuwatch", "daemon", "--config", str(path), "--check-config"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "OK; listen 127.0.0.1:19464" in result.stdout


def test_the_printed_example_is_a_valid_config_that_changes_nothing(tmp_path: Path) -> None:
    example = render_example()
    assert load_config(write(tmp_path, example), env={}) == Config(path=tmp_path / "config.toml")
    receiver = "\n".join(line[2:].split("  #")[0] for line in example.splitlines()
                         if line.startswith("# ") and "=" in line and "[[receivers]]" not in line
                         and line.split()[1] in {"name", "kind", "url", "secret_file", "group_by"})
    (r,) = load_config(write(tmp_path, "[[receivers]]\n" + receiver), env={}).receivers
    assert (r.name, r.kind, r.group_by) == ("ops", "alertmanager", ("alertname",))


def test_gpuwatch_config_naming_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.toml: no such config file .*GPUWATCH_CONFIG"):
        load_config(None, env={"GPUWATCH_CONFIG": str(tmp_path / "missing.toml")})


def test_an_unknown_gpuwatch_variable_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="GPUWATCH_DAEMON_LISTN is not a gpuwatch setting; did you mean "
                                          "GPUWATCH_DAEMON_LISTEN"):
        load_config(None, env={"XDG_CONFIG_HOME": str(tmp_path), "GPUWATCH_DAEMON_LISTN": "127.0.0.1:1"})


def test_the_variables_the_test_tools_read_are_not_refused_by_a_daemon_they_start(tmp_path: Path) -> None:
    # `GPUWATCH_TEST_WORKERS=0 ./scripts/test.sh` is documented: every daemon the suite starts inherits it
    root = Path(__file__).resolve().parents[2]
    tools = (root / "scripts" / "test.sh").read_text() + (root / ".ci" / "run").read_text()
    names = set(re.findall(r"\bGPUWATCH_[A-Z_]+\b", tools))
    assert {"GPUWATCH_TEST_WORKERS", "GPUWATCH_TEST_MARK", "GPUWATCH_TEST_TORCH"} <= names
    config = load_config(None, env={"XDG_CONFIG_HOME": str(tmp_path), **dict.fromkeys(names, "1")})
    assert config == load_config(None, env={"XDG_CONFIG_HOME": str(tmp_path)})  # and they change nothing


@pytest.mark.parametrize(("name", "value", "message"), [
    ("GPUWATCH_DAEMON_MAX_PROCESS_SERIES", "9" * 5000, "expected a whole number of 1 or more, got 999"),
    ("GPUWATCH_SAMPLER_INTERVAL", "nan", "must be a finite number, got nan"),
    ("GPUWATCH_NOTIFY_TIMEOUT", "0", "must be between 100ms and 5m, got 0"),
    ("GPUWATCH_NOTIFY_MAX_AGE", "1e999", "is not a duration"),
], ids=["huge-integer", "nan-interval", "zero-timeout", "overflowing-duration"])
def test_environment_values_are_bounded_like_file_values(tmp_path: Path, name: str, value: str,
                                                         message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        load_config(None, env={"XDG_CONFIG_HOME": str(tmp_path), name: value})
    assert len(str(err.value)) < 300


@pytest.mark.parametrize("speed", ["nan", "-5", "inf", "1e9"])
def test_replay_speed_must_be_a_finite_number_from_0(speed: str) -> None:
    run = subprocess.run([sys.executable, "-m", "gpuwatch", "snapshot", "--replay", "x.ndjson.gz", "--speed", speed],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2 and "--speed: must be between 0" in run.stderr and "Traceback" not in run.stderr
