"""A command imports what it runs, not what other commands run: ``gpuwatch snapshot`` prints a table without
Textual, ``daemon --check-config`` and a daemon flag error answer without the daemon's server and sampler, and
``--version`` imports no command at all. Each is a fresh interpreter, as a user's shell starts it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwatch.data import bundled_recording

#: Runs the command line in this interpreter, then prints its exit status and the modules it imported.
PROBE = """
import contextlib, io, json, sys
from gpuwatch.cli.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def imported_by(*argv: str, cwd: Path) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120,
                          cwd=cwd, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    return answer["code"], set(answer["modules"])


@pytest.mark.parametrize(("argv", "code", "not_imported"), [
    (["snapshot", "--json", "--replay", str(bundled_recording()), "--at", "60"], 0, {"textual", "gpuwatch.tui.app"}),
    (["daemon", "--check-config"], 0, {"gpuwatch.daemon.runner", "gpuwatch.runtime.build", "textual"}),
    (["daemon", "--interval", "soon"], 2, {"gpuwatch.daemon.runner", "gpuwatch.runtime.build", "textual"}),
    (["rules", "check", str(Path(__file__).parents[2] / "gpuwatch/data/alerts/default.yml")], 0,
     {"gpuwatch.runtime.build", "psutil", "textual"}),
    (["--version"], 0, {"gpuwatch.cli.tui", "gpuwatch.cli.daemon", "gpuwatch.cli.snapshot", "textual"}),
], ids=["snapshot", "daemon-check-config", "daemon-flag-error", "rules-check", "version"])
def test_a_command_does_not_import_what_only_other_commands_use(
        tmp_path: Path, argv: list[str], code: int, not_imported: set[str]) -> None:
    got, modules = imported_by(*argv, cwd=tmp_path)
    assert got == code
    assert modules & not_imported == set()


def test_the_probe_sees_what_a_command_does_import(tmp_path: Path) -> None:
    """The control for the test above: a snapshot samples (the runtime's builder) and formats with the
    dashboard's number formats, and the probe lists both."""
    code, modules = imported_by("snapshot", "--json", "--replay", str(bundled_recording()), "--at", "60", cwd=tmp_path)
    assert code == 0
    assert {"gpuwatch.runtime.build", "gpuwatch.tui.format"} <= modules
