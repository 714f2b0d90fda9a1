"""The worked examples' bench: the "Where does X go" table read from ``docs/architecture.md``, a copy of the
package with one change made in named files only, and a script run against that copy."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE_HEADING = "## Where does X go"


def table() -> dict[str, set[str]]:
    """Each row of the table: the files (and ``dir/<name>/`` patterns) it names, relative to ``gpuwatch/``."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index(TABLE_HEADING):]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("X", "---"):
            rows[cells[0]] = {p for p in re.findall(r"`([^`\s]+)`", cells[1]) if "/" in p or p.endswith(".py")}
    return rows


def worked_example(tmp_path: Path, edits: dict[str, list[tuple[str, str]]], new: dict[str, str],
                   script: str) -> str:
    """Copy the package, apply ``edits`` (file -> [(text, replacement)], each text found exactly once; an
    empty text: the replacement is added at the end) and
    add the ``new`` files, then run ``script`` against the copy (the tests' helpers importable); its output."""
    copy = tmp_path / "gpuwatch"
    shutil.copytree(ROOT / "gpuwatch", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, changes in edits.items():
        path = copy / rel
        text = path.read_text(encoding="utf-8")
        for old, replacement in changes:
            if not old:  # added at the end
                text += replacement
                continue
            assert text.count(old) == 1, f"{rel}: the example's anchor {old!r} is not there exactly once"
            text = text.replace(old, replacement)
        path.write_text(text, encoding="utf-8")
    for rel, body in new.items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_text(textwrap.dedent(body), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "tests")])}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def touched(edits: dict[str, list[tuple[str, str]]], new: dict[str, str]) -> set[str]:
    """The files an example changed, as the table names them (a new package under ``sources/`` is
    ``sources/<name>/``, a new widget module ``tui/widgets/``)."""
    out = set(edits)
    for rel in new:
        parts = rel.split("/")
        out.add(f"{parts[0]}/<name>/" if parts[0] == "sources" and len(parts) > 2 else "/".join(parts[:-1]) + "/")
    return out
