"""The data flow is one way: consumers read Snapshots and never import a source (a lint rule, checked here
with the project's own ruff configuration)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff(filename: str, code: str) -> subprocess.CompletedProcess[str]:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    return subprocess.run([ruff, "check", "--no-cache", "--select", "TID251", "--stdin-filename", filename, "-"],
                          input=code, text=True, capture_output=True, cwd=ROOT)


@pytest.mark.parametrize("consumer", ["alerts", "doctor", "exporter", "tui", "daemon", "notify"])
@pytest.mark.parametrize("module", ["gpuwatch.sources.host", "gpuwatch.runtime.build"])
def test_a_consumer_that_imports_a_source_fails_the_lint(consumer: str, module: str) -> None:
    result = _ruff(f"gpuwatch/{consumer}/probe.py", f"import {module}\n")
    assert result.returncode == 1 and "TID251" in result.stdout


@pytest.mark.parametrize("composer", ["cli", "sampler", "runtime", "sources"])
def test_the_composition_roots_may_import_sources(composer: str) -> None:
    assert _ruff(f"gpuwatch/{composer}/probe.py", "import gpuwatch.sources.host\n").returncode == 0
