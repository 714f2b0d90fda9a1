"""Command lines for the programs under measurement: gpuwatch's daemon and dashboard, and the anchors.

Each gpuwatch process gets its own config, state and cache folders so several daemons can run side by
side without sharing an outbox or a config file.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PY = sys.executable


def gpuwatch(*args: str) -> list[str]:
    return [PY, "-m", "gpuwatch", *args]


@functools.cache
def _help(command: str) -> str:
    done = subprocess.run(gpuwatch(command, "--help"), capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def listen_args(port: int) -> list[str]:
    """How this daemon is told where to listen (the flag is read from its --help)."""
    text = _help("daemon")
    if "--listen" in text:
        return ["--listen", f"127.0.0.1:{port}"]
    if "--port" in text:
        return (["--host", "127.0.0.1"] if "--host" in text else []) + ["--port", str(port)]
    if "--bind" in text:
        return ["--bind", f"127.0.0.1:{port}"]
    raise RuntimeError(f"'gpuwatch daemon --help' names no --listen/--port/--bind option:\n{text[:800]}")


def daemon(port: int, *sampling: str) -> list[str]:
    return gpuwatch("daemon", *listen_args(port), *sampling)


def tui(*sampling: str) -> list[str]:
    return gpuwatch("tui", *sampling)


def isolated_env(name: str, root: Path) -> dict[str, str]:
    """XDG folders of its own for one gpuwatch process."""
    base = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
    env = {}
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        d = base / var.lower()
        d.mkdir()
        env[var] = str(d)
    return env


def nvitop(*args: str) -> list[str]:
    return [PY, "-m", "nvitop", *args]


def nvitop_exporter(port: int, interval: float = 1.0) -> list[str]:
    return [PY, "-m", "nvitop_exporter", "--bind-address", "127.0.0.1", "--port", str(port),
            "--interval", f"{interval:g}"]


def gpustat_loop(interval: float = 1.0) -> list[str]:
    return [PY, "-m", "gpustat", "-i", f"{interval:g}", "--show-cmd", "--show-user"]


def nvidia_smi_loop() -> list[str]:
    return ["nvidia-smi", "-l", "1"]


def py_spy() -> str | None:
    """py-spy on PATH, in the bin/ of a PYTHONPATH entry (pip install --target puts it there), or beside
    this Python (a virtual environment)."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = [Path(entry) / "bin" for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    for folder in (*beside, Path(sys.executable).parent):
        if (folder / "py-spy").exists():
            return str(folder / "py-spy")
    return None
