#!/usr/bin/env python3
"""Write every sample output in README.md from the code: each command runs here, on the bundled recording or
the test fixtures, and its output replaces the block between ``<!-- sample: NAME -->`` and
``<!-- sample: end -->``. ``--check`` changes nothing and exits 1 (with a diff) where a block is stale, so a
test keeps the README true.

    python scripts/readme_samples.py           # rewrite the blocks
    python scripts/readme_samples.py --check   # exit 1 if any block differs from what the code prints
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
STAGES = "tests/efficiency/fixtures/stages-h200.ndjson.gz"
DETAILS = "tests/efficiency/fixtures/stages-details-h200.json"

#: name -> (the gpuwatch arguments, the exit statuses it may end with). ``{out}`` is a scratch directory that
#: the stages sample's ``--out`` filled (the two stage runs the second compare sets side by side).
SAMPLES: dict[str, tuple[list[str], tuple[int, ...]]] = {
    "report": (["report", "--replay", "bundled"], (0,)),
    "digest": (["report", "--replay", "bundled", "--since", "7d", "--by", "owner", "--format", "markdown"], (0,)),
    "compare-stages": (["compare", "--stages", STAGES, "--details", DETAILS], (0,)),
    "compare-runs": (["compare", "{out}/batched@206-1102.ndjson.gz", "{out}/compiled@206-1153.ndjson.gz"], (1,)),
    "rollouts": (["report", "--replay", "tests/efficiency/fixtures/rollout-slower.ndjson.gz", "--by", "gpu"], (0,)),
}
#: name -> the dashboard screen ``scripts/screenshots.py --text`` prints (headless, at a fixed point of the recording).
SCREENS: dict[str, str] = {"tui-paused": "paused-4-min-back-120x34"}
BLOCK = re.compile(r"(<!-- sample: (?P<name>[\w-]+) -->\n```\n)(?P<body>.*?)(```\n<!-- sample: end -->)", re.S)


def _gpuwatch(args: list[str]) -> subprocess.CompletedProcess[str]:
    # a fixed terminal width and no terminal (no colour, no chart): the same text on every machine
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "TZ": "UTC", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "gpuwatch", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, stdin=subprocess.DEVNULL, timeout=300, check=False)


def outputs() -> dict[str, str]:
    """Each sample's output, as the README shows it."""
    with tempfile.TemporaryDirectory() as out:
        cut = _gpuwatch(["compare", "--stages", STAGES, "--details", DETAILS, "--out", out])
        if cut.returncode != 0:
            raise SystemExit(f"compare --stages --out failed: {cut.stderr.strip()}")
        texts = {}
        for name, (args, statuses) in SAMPLES.items():
            done = _gpuwatch([a.format(out=out) for a in args])
            if done.returncode not in statuses:
                raise SystemExit(f"sample {name}: gpuwatch {' '.join(args)} exited {done.returncode} "
                                 f"(expected {statuses}): {done.stderr.strip()}")
            texts[name] = done.stdout.rstrip("\n") + "\n"
        for name, shot in SCREENS.items():
            done = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshots.py"), "--text", shot],
                                  capture_output=True, text=True, cwd=ROOT, env={**os.environ, "TZ": "UTC"},
                                  stdin=subprocess.DEVNULL, timeout=300, check=False)
            if done.returncode != 0:
                raise SystemExit(f"screen {name}: scripts/screenshots.py --text {shot} failed: {done.stderr.strip()}")
            texts[name] = done.stdout
        return texts


def render(readme: str, texts: dict[str, str]) -> str:
    """``readme`` with every sample block holding ``texts[name]``; every sample must have a block."""
    found = {m.group("name") for m in BLOCK.finditer(readme)}
    if found != set(texts):
        raise SystemExit(f"README.md sample blocks {sorted(found)} are not the samples {sorted(texts)}")
    return BLOCK.sub(lambda m: m.group(1) + texts[m.group("name")] + m.group(4), readme)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if a block differs; change nothing")
    args = parser.parse_args()
    before = README.read_text()
    after = render(before, outputs())
    if args.check:
        if after != before:
            sys.stdout.writelines(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                                       "README.md", "README.md (from the code)"))
            print("README.md's samples are stale: python scripts/readme_samples.py", file=sys.stderr)
            return 1
        return 0
    if after != before:
        README.write_text(after)
        print("README.md: samples rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
