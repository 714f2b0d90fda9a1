"""External tools the tests drive for real (promtool, prometheus, alertmanager, tmux, systemd-analyze).

Where a tool is missing the test is skipped, except under GPUWATCH_REQUIRE_TOOLS=1 (CI), where a
missing tool fails the test: CI installs them, so a skip there would hide a broken setup."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest


def require_tool(*names: str) -> str:
    """Path of the first of ``names`` found on PATH; skip (or fail in CI) when none is."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    message = f"{' or '.join(names)} not installed (scripts/test.sh installs it as root)"
    if os.environ.get("GPUWATCH_REQUIRE_TOOLS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def require_torch() -> Any:
    """The torch module; skip (or fail in CI) without it. scripts/test.sh installs the CPU build only when
    asked (GPUWATCH_TEST_TORCH=1), so a plain run never downloads a multi-GB CUDA build."""
    try:
        import torch
    except ImportError:
        message = "torch not installed (GPUWATCH_TEST_TORCH=1 ./scripts/test.sh installs the CPU build)"
        if os.environ.get("GPUWATCH_REQUIRE_TOOLS") == "1" and os.environ.get("GPUWATCH_TEST_TORCH") == "1":
            pytest.fail(message)
        pytest.skip(message, allow_module_level=True)
    return torch
