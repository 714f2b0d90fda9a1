"""README.md's sample outputs are what the code prints now: ``scripts/readme_samples.py --check`` runs each
command on the bundled recording or the test fixtures and compares it with its block, character for
character (the commands' output depends on nothing but their input: no wall clock, no terminal)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "readme_samples.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_samples", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_sample_output_in_the_readme_is_what_the_code_prints() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr


def test_a_second_run_prints_the_samples_again() -> None:
    """Nothing run-dependent: another run, in another process at another time, prints the README's text again
    (with the test above, two runs agree; else no check could hold)."""
    readme_samples = _script()
    readme = readme_samples.README.read_text()
    blocks = {m["name"]: m["body"] for m in readme_samples.BLOCK.finditer(readme)}
    assert readme_samples.outputs() == blocks


def test_a_stale_block_is_found_and_rewritten_from_the_code() -> None:
    readme_samples = _script()
    texts = {name: f"{name} output\n" for name in readme_samples.SAMPLES}
    readme = "".join(f"text\n<!-- sample: {n} -->\n```\nstale\n```\n<!-- sample: end -->\n" for n in texts)
    rendered = readme_samples.render(readme, texts)
    assert "stale" not in rendered and all(t in rendered for t in texts.values())
    assert readme_samples.render(rendered, texts) == rendered
