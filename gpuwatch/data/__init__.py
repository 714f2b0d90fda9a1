"""Data shipped inside the package: the bundled H200 recording."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).parent
BUNDLED_RECORDING = DATA_DIR / "h200-incident.ndjson.gz"
#: What ``--replay`` takes for the bundled recording: its installed path differs between a clone, a venv,
#: ``pip --user`` and pipx, so no one has to find it.
BUNDLED_ALIAS = "bundled"


def bundled_recording() -> Path:
    """The real H200 recording played when this machine has no NVIDIA driver."""
    return BUNDLED_RECORDING


def replay_path(text: str) -> Path:
    """A ``--replay`` argument as a path: ``bundled`` is the bundled recording, anything else a file."""
    return BUNDLED_RECORDING if text == BUNDLED_ALIAS else Path(text)


def use_bundled_hint() -> str:
    """How to name the bundled recording on a command line, with where it is installed."""
    return f"'--replay {BUNDLED_ALIAS}' plays the H200 recording shipped with gpuwatch, {BUNDLED_RECORDING}"
