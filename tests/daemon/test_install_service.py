"""``gpuwatch install-service``: the unit is hardened, lets NVML reach the GPU, and systemd accepts it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tools import require_tool

from gpuwatch.cli.install_service import gpuwatch_command, render_unit


def unit_lines(listen: str = "127.0.0.1:9464") -> set[str]:
    return set(render_unit(gpuwatch_command(), listen).splitlines())


@pytest.mark.parametrize("line", [
    "Type=notify", "WatchdogSec=30s", "Restart=on-failure", "DynamicUser=yes", "StateDirectory=gpuwatch",
    "NoNewPrivileges=yes", "ProtectSystem=strict", "DevicePolicy=closed", "DeviceAllow=/dev/nvidiactl rw",
    "DeviceAllow=/dev/nvidia-uvm rw", "DeviceAllow=char-nvidia-frontend rw", "ExecReload=/bin/kill -HUP $MAINPID",
])
def test_the_unit_has(line: str) -> None:
    assert line in unit_lines()


def test_the_unit_keeps_the_nvidia_devices_reachable() -> None:
    assert not [line for line in unit_lines() if line.startswith("PrivateDevices")]


def test_exec_start_is_the_installed_gpuwatch_serving_on_the_chosen_address() -> None:
    (start,) = [line for line in unit_lines("127.0.0.1:9500") if line.startswith("ExecStart=")]
    binary = start.split("=", 1)[1].split()[0]
    assert Path(binary).is_absolute() and Path(binary).exists()
    assert start.endswith("daemon --listen 127.0.0.1:9500")


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    analyze = require_tool("systemd-analyze")
    unit = tmp_path / "gpuwatch.service"
    result = subprocess.run([sys.executable, "-m", "gpuwatch", "install-service", "--write", "--path", str(unit)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "systemctl daemon-reload" in result.stdout, result.stderr
    verify = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False)
    assert verify.returncode == 0, verify.stderr
    assert verify.stderr.strip() == "", verify.stderr  # unknown keys are only warnings: none allowed


def test_write_to_a_place_it_cannot_write_says_how_to_proceed(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = subprocess.run([sys.executable, "-m", "gpuwatch", "install-service", "--write", "--path",
                             str(blocker / "gpuwatch.service")], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 1 and "cannot write" in result.stderr and "Traceback" not in result.stderr
