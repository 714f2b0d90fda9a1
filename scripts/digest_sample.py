#!/usr/bin/env python3
"""Write ``docs/samples/digest.md``: the weekly digest (``gpuwatch report --since 7d --format markdown``) of two
weeks of roll-ups of a four-GPU H200 fleet (``tests/efficiency/fleet.py``, written through the real store),
with one rollout. ``--check`` changes nothing and exits 1 (with a diff) when the file is stale; a test does
the same comparison.

    python scripts/digest_sample.py           # rewrite the sample
    python scripts/digest_sample.py --check   # exit 1 if it differs from what the code renders
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "docs" / "samples" / "digest.md"
WEEK = 7 * 86400.0
SOURCE = "example fleet of four H200s (tests/efficiency/fleet.py)"


def render() -> str:
    """The sample, as the code renders it now."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from efficiency import fleet

    from gpuwatch.efficiency import digest, digest_markdown

    store = fleet.build()
    rollup = store.rollup()
    store.close()
    since = fleet.UNTIL - WEEK
    built = digest.build(rollup.since(since), rollup.between(since - WEEK, since), since, fleet.UNTIL, SOURCE, WEEK,
                         fleet.rollouts())
    return digest_markdown.render(built)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the sample differs; change nothing")
    args = parser.parse_args()
    text = render()
    old = SAMPLE.read_text() if SAMPLE.exists() else ""
    if args.check:
        if text != old:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(SAMPLE),
                                                       "from the code"))
            print("docs/samples/digest.md is stale: python scripts/digest_sample.py", file=sys.stderr)
            return 1
        return 0
    SAMPLE.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
