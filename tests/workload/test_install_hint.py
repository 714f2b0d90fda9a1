"""Without torch, the commands that need it say how to install it for the install gpuwatch has (a source
install: the package is not on PyPI), and never name a package index entry that does not exist."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from gpuwatch.cli.main import main


@pytest.mark.parametrize("argv", [["workload", "--device", "cpu", "--duration", "1"],
                                  ["validate", "--device", "cpu", "--stages", "naive"]])
def test_without_torch_the_cli_says_how_to_install_the_cpu_build(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "torch is not installed" in err and "--index-url https://download.pytorch.org/whl/cpu" in err
    assert "pipx inject gpuwatch-monitor torch" in err and "gpuwatch-monitor[workload]" not in err
    assert "Traceback" not in err
