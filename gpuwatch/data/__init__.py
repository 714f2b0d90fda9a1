"""Data shipped inside the package: the bundled H200 recording."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).parent
BUNDLED_RECORDING = DATA_DIR / "h200-incident.ndjson.gz"


def bundled_recording() -> Path:
    """The real H200 recording played when this machine has no NVIDIA driver."""
    return BUNDLED_RECORDING
