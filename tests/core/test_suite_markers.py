"""The suite's own markers hold what CI relies on: every test module that needs torch is marked ``torch``
(CI runs the suite once without torch, as the README's default install has it, then those tests alone with
torch's CPU build); nothing else is, so the second pass is only what the first one skipped."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEEDS_TORCH = re.compile(r"^(?:torch = )?(?:require_torch\(\)|pytest\.importorskip\(\"torch\"\))|^import torch",
                         re.MULTILINE)
MARKED = re.compile(r"^pytestmark = .*pytest\.mark\.torch", re.MULTILINE)


def test_every_module_that_needs_torch_is_marked_torch_and_no_other() -> None:
    modules = sorted(p for d in ("tests", "benchmarks") for p in (ROOT / d).rglob("test_*.py"))
    needs = {p.relative_to(ROOT).as_posix() for p in modules if NEEDS_TORCH.search(p.read_text())}
    marked = {p.relative_to(ROOT).as_posix() for p in modules if MARKED.search(p.read_text())}
    assert needs, "no module needs torch: the pattern no longer finds require_torch()"
    assert needs == marked
