"""``gpuwatch install-service``: the unit is hardened, lets NVML reach the GPU, systemd accepts it, its remote
form really serves with a token, and nothing that would stop it starting gets written."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from tools import require_tool

from daemon.incident import write_recording
from gpuwatch.cli.install_service import gpuwatch_command
from gpuwatch.cli.service_paths import problem, problems, shebang_interpreter
from gpuwatch.cli.service_unit import UnitSpec, exec_quote, render_unit

MAX_EXPOSURE = 2.0


def unit_lines(listen: str = "127.0.0.1:19464", token: str | None = None) -> list[str]:
    return render_unit(UnitSpec(gpuwatch_command(), listen, 30, token)).splitlines()


def install_service(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwatch", "install-service", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def exec_start(unit: str) -> list[str]:
    (line,) = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=")]
    return [a.replace("%%", "%").replace("$$", "$") for a in shlex.split(line.split("=", 1)[1])]


@pytest.mark.parametrize("line", [
    "Type=notify", "WatchdogSec=30s", "Restart=on-failure", "DynamicUser=yes", "StateDirectory=gpuwatch",
    "CacheDirectory=gpuwatch",
    "NoNewPrivileges=yes", "ProtectSystem=strict", "DevicePolicy=closed", "DeviceAllow=/dev/nvidiactl rw",
    "DeviceAllow=/dev/nvidia-uvm rw", "DeviceAllow=char-nvidia-frontend rw", "ExecReload=/bin/kill -HUP $MAINPID",
    "PrivateTmp=yes", "SystemCallFilter=~@privileged @resources", "LimitNOFILE=65536",
])
def test_the_unit_has(line: str) -> None:
    assert line in unit_lines()


def test_the_unit_keeps_the_nvidia_devices_and_other_users_processes_reachable() -> None:
    banned = ("PrivateDevices", "ProtectProc", "ProcSubset", "PrivateUsers")
    assert not [line for line in unit_lines() if line.startswith(banned)]


def test_exec_start_is_the_installed_gpuwatch_serving_on_the_chosen_address() -> None:
    argv = exec_start("\n".join(unit_lines("127.0.0.1:9500")))
    assert Path(argv[0]).is_absolute() and Path(argv[0]).exists()
    assert argv[-3:] == ["daemon", "--listen", "127.0.0.1:9500"]


def test_a_remote_unit_passes_allow_remote_and_the_token_as_a_credential() -> None:
    lines = unit_lines("0.0.0.0:19464", "/etc/gpuwatch/token")
    assert "LoadCredential=token:/etc/gpuwatch/token" in lines
    (start,) = [ln for ln in lines if ln.startswith("ExecStart=")]
    assert start.endswith("daemon --listen 0.0.0.0:19464 --allow-remote --token-file %d/token")


@pytest.mark.parametrize(("arg", "quoted"), [
    ("/opt/gpuwatch/bin/gpuwatch", "/opt/gpuwatch/bin/gpuwatch"),
    ("/opt/my tools/gpuwatch", '"/opt/my tools/gpuwatch"'),
    ("/opt/100%/gpuwatch", "/opt/100%%/gpuwatch"),
    ("/opt/$HOME/gpu\"watch", '"/opt/$$HOME/gpu\\"watch"'),
])
def test_exec_start_arguments_are_quoted_for_systemd(arg: str, quoted: str) -> None:
    assert exec_quote(arg) == quoted


@pytest.mark.parametrize(("args", "message"), [
    (["--listen", "127.0.0.1:19464\nExecStartPre=/bin/sh -c id"], "control characters (a newline?)"),
    (["--listen", "127.0.0.1:19464\n"], "control characters"),
    (["--listen", "nowhere"], "is not HOST:PORT"),
    (["--listen", "127.0.0.1:0"], "a fixed port"),
    (["--watchdog", "-5"], "--watchdog -5: give 1-3600 seconds, or 0"),
    (["--watchdog", "100000"], "--watchdog 100000"),
])
def test_bad_values_never_reach_the_unit(args: list[str], message: str) -> None:
    result = install_service(*args)
    assert result.returncode == 2 and message in result.stderr and result.stdout == ""
    assert "Traceback" not in result.stderr


def test_watchdog_zero_leaves_the_watchdog_out() -> None:
    result = install_service("--watchdog", "0")
    assert result.returncode == 0 and "WatchdogSec" not in result.stdout and "Type=notify" in result.stdout


def _analyze(analyze: str, unit: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([analyze, *args, str(unit)], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("listen", ["127.0.0.1:19464", "0.0.0.0:19464"])
def test_systemd_analyze_verifies_the_unit_and_scores_its_exposure_at_most_2(tmp_path: Path, listen: str) -> None:
    analyze = require_tool("systemd-analyze")
    unit = tmp_path / "gpuwatch.service"
    result = install_service("--write", "--force", "--path", str(unit), "--listen", listen,
                             "--token-file", str(tmp_path / "token"))
    assert result.returncode == 0 and "systemctl daemon-reload" in result.stdout, result.stderr
    verify = _analyze(analyze, unit, "verify")
    assert verify.returncode == 0 and verify.stderr.strip() == "", verify.stderr  # no warnings either
    security = _analyze(analyze, unit, "security", "--offline=yes")
    score = float(re.search(r"Overall exposure level for \S+: ([\d.]+)", security.stdout).group(1))  # type: ignore[union-attr]
    assert score <= MAX_EXPOSURE, security.stdout


def test_stacks_grant_ptrace_and_nothing_else_and_the_unit_still_verifies(tmp_path: Path) -> None:
    """``--stacks`` keeps one capability, CAP_SYS_PTRACE, in the bounding and ambient sets (py-spy, run by the
    daemon, inherits it) and allows the two system calls py-spy reads another process with; the unit without
    it keeps no capability at all."""
    plain = render_unit(UnitSpec(("/usr/bin/gpuwatch",), "127.0.0.1:19464")).splitlines()
    stacks = render_unit(UnitSpec(("/usr/bin/gpuwatch",), "127.0.0.1:19464", stacks=True)).splitlines()
    assert "CapabilityBoundingSet=" in plain and not [ln for ln in plain if "PTRACE" in ln or "ptrace" in ln]
    assert set(stacks) - set(plain) == {"CapabilityBoundingSet=CAP_SYS_PTRACE", "AmbientCapabilities=CAP_SYS_PTRACE",
                                        "SystemCallFilter=ptrace process_vm_readv"}
    assert set(plain) - set(stacks) == {"CapabilityBoundingSet="}
    analyze = require_tool("systemd-analyze")
    unit = tmp_path / "gpuwatch.service"
    result = install_service("--write", "--force", "--path", str(unit), "--stacks")
    assert result.returncode == 0, result.stderr
    assert "AmbientCapabilities=CAP_SYS_PTRACE" in unit.read_text()
    verify = _analyze(analyze, unit, "verify")
    assert verify.returncode == 0 and verify.stderr.strip() == "", verify.stderr


def test_a_path_with_spaces_stays_one_argument_for_systemd(tmp_path: Path) -> None:
    analyze = require_tool("systemd-analyze")
    binary = tmp_path / "my tools" / "gpuwatch"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    unit = tmp_path / "gpuwatch.service"
    result = install_service("--write", "--force", "--exec", str(binary), "--path", str(unit))
    assert result.returncode == 0, result.stderr
    verify = _analyze(analyze, unit, "verify")
    assert verify.returncode == 0 and verify.stderr.strip() == "", verify.stderr  # systemd found the binary
    assert exec_start(unit.read_text())[0] == str(binary)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_remote_unit_command_serves_with_the_token_it_created(tmp_path: Path) -> None:
    """--write creates the token (0600); the unit's own ExecStart, with systemd's credential directory in
    place of %d, starts a remote daemon that refuses reads without that token and serves them with it."""
    port = _free_port()
    token_file, unit = tmp_path / "etc" / "token", tmp_path / "gpuwatch.service"
    result = install_service("--write", "--force", "--path", str(unit), "--listen", f"0.0.0.0:{port}",
                             "--token-file", str(token_file))
    assert result.returncode == 0 and f"wrote a new token to {token_file} (mode 0600)" in result.stdout
    assert token_file.stat().st_mode & 0o777 == 0o600
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "token").write_text(token_file.read_text())
    argv = [a.replace("%d", str(credentials)) for a in exec_start(unit.read_text())]
    argv += ["--replay", str(write_recording(tmp_path / "rec.ndjson.gz", n=40)), "--state-dir", str(tmp_path)]
    (tmp_path / "none.toml").write_text("")  # an empty config: defaults, whatever the user's config says
    daemon = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "GPUWATCH_CONFIG": str(tmp_path / "none.toml")})
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert daemon.poll() is None and time.monotonic() < deadline, daemon.stderr.read() if daemon.stderr else ""
            time.sleep(0.1)
        assert requests.get(url + "/metrics", timeout=5).status_code == 401
        auth = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
        assert requests.get(url + "/metrics", headers=auth, timeout=5).status_code == 200
    finally:
        daemon.terminate()
        daemon.wait(20)
    again = install_service("--write", "--force", "--path", str(unit), "--listen", f"0.0.0.0:{port}",
                            "--token-file", str(token_file))
    assert again.returncode == 0 and f"kept the token in {token_file}" in again.stdout


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can enter (pytest's tmp_path sits under a 0700 one)."""
    path = Path(tempfile.mkdtemp(dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_an_interpreter_under_tmp_or_a_private_directory_is_found(tmp_path: Path, open_dir: Path) -> None:
    assert "which the service cannot see (PrivateTmp=)" in (problem(tmp_path) or "")
    private = open_dir / "home"
    (private / "venv").mkdir(parents=True)
    private.chmod(0o700)
    why = problem(private / "venv", private_tmp=())
    assert why is not None and f"lies under {private} (mode 0700)" in why
    private.chmod(0o755)
    assert problem(private / "venv", private_tmp=()) is None
    (private / "venv").chmod(0o711)
    assert "is not readable by the service's dynamic user" in (problem(private / "venv", private_tmp=()) or "")
    assert problems([Path("/usr/bin/env")]) == []


def test_write_refuses_a_gpuwatch_the_dynamic_user_cannot_run_and_says_how_to_fix_it(tmp_path: Path) -> None:
    script = tmp_path / "gpuwatch"
    script.write_text(f"#!{tmp_path}/venv/bin/python\n")
    script.chmod(0o755)
    assert shebang_interpreter(script) == tmp_path / "venv" / "bin" / "python"
    unit = tmp_path / "gpuwatch.service"
    result = install_service("--write", "--exec", str(script), "--path", str(unit))
    assert result.returncode == 1 and not unit.exists() and "Traceback" not in result.stderr
    assert "not writing a unit that cannot start" in result.stderr and "PrivateTmp=" in result.stderr
    assert "/opt/gpuwatch" in result.stderr and "pipx install" in result.stderr
    printed = install_service("--exec", str(script))
    assert printed.returncode == 0 and "warning: the service could not start" in printed.stderr
    assert install_service("--write", "--force", "--exec", str(script), "--path", str(unit)).returncode == 0


def test_write_to_a_place_it_cannot_write_says_how_to_proceed(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = install_service("--write", "--force", "--path", str(blocker / "gpuwatch.service"))
    assert result.returncode == 1 and "cannot write" in result.stderr and "Traceback" not in result.stderr
