"""Regenerate screenshots/ (SVG and PNG) of the dashboard from the bundled H200 recording.

    .venv/bin/python scripts/screenshots.py            # all screenshots
    .venv/bin/python scripts/screenshots.py --svg-only # no PNG conversion

The app is built by the same factory as ``gpuwatch tui --replay``; the recording is played up to a fixed
point before the screen is taken, so the pictures are reproducible. PNGs are converted with
``rsvg-convert`` (Debian/Ubuntu: ``apt-get install librsvg2-bin``), which renders Textual's SVGs with a
monospace font; non-breaking spaces are made plain first because librsvg drops leading ones.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuwatch.data import bundled_recording  # noqa: E402
from gpuwatch.model.recording import iter_snapshots  # noqa: E402
from gpuwatch.model.snapshot import Snapshot  # noqa: E402
from gpuwatch.sampler.sampler import Sampler  # noqa: E402
from gpuwatch.tui.app import make_app  # noqa: E402
from gpuwatch.tui.feed import local_feed  # noqa: E402

OUT = ROOT / "screenshots"


@dataclass(frozen=True)
class Shot:
    name: str
    ticks: int
    size: tuple[int, int]
    keys: tuple[str, ...] = ()
    what: str = ""


SHOTS = (
    Shot("naive-serving-160x50", 130, (160, 50), what="the incident: GPU-Util ~30 %, SM occupancy 2 %, "
         "one Python thread at 100 % (the doctor says: input pipeline CPU-bound)"),
    Shot("bf16-power-capped-160x50", 400, (160, 50), what="after the fixes: 96 % SM activity, tensor cores busy, "
         "power_cap clock event"),
    Shot("naive-serving-80x24", 130, (80, 24), what="the same at 80x24"),
    Shot("batched-fp32-250x70", 370, (250, 70), what="batched FP32 at 250x70: SM busy, tensor cores idle"),
    Shot("help-100x36", 130, (100, 36), ("question_mark",), what="the ? screen: keys and what the numbers mean"),
)


class RecordingProducer:
    """Snapshots of a recording, one per ``collect()``, labelled as a recording (origin)."""

    def __init__(self, path: Path) -> None:
        self._it: Iterator[Snapshot] = iter_snapshots(path)
        self.origin = f"recording:{path.name}"

    def collect(self) -> Snapshot | None:
        snap = next(self._it, None)
        return None if snap is None else dataclasses.replace(snap, origin=self.origin)

    def close(self) -> None:
        self._it = iter(())


async def take(shot: Shot, recording: Path) -> str:
    feed = local_feed(Sampler(RecordingProducer(recording)), f"recording: {recording.name}", True, run_sampler=False)
    feed.prime(shot.ticks)
    app = make_app(feed)
    async with app.run_test(size=shot.size) as pilot:
        await pilot.pause()
        for key in shot.keys:
            await pilot.press(key)
        await pilot.pause(0.2)
        return app.export_screenshot(title=f"gpuwatch · {shot.name}")


def to_png(svg: Path, png: Path, rsvg: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / svg.name
        text = svg.read_text(encoding="utf-8").replace("&#160;", " ").replace("<svg ", '<svg xml:space="preserve" ', 1)
        plain.write_text(text, encoding="utf-8")
        subprocess.run([rsvg, "--width", "1600", str(plain), "-o", str(png)], check=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--svg-only", action="store_true", help="skip the PNG conversion")
    p.add_argument("--recording", type=Path, default=bundled_recording(), help="recording to show")
    args = p.parse_args(argv)
    rsvg = shutil.which("rsvg-convert")
    if not args.svg_only and rsvg is None:
        print("screenshots: rsvg-convert not found; install librsvg2-bin (apt-get install librsvg2-bin) "
              "or pass --svg-only", file=sys.stderr)
        return 2
    OUT.mkdir(exist_ok=True)
    lines = ["# Screenshots", "", "Regenerate with `.venv/bin/python scripts/screenshots.py` "
             f"(from `{args.recording.name}`).", ""]
    for shot in SHOTS:
        svg = OUT / f"{shot.name}.svg"
        svg.write_text(asyncio.run(take(shot, args.recording)), encoding="utf-8")
        if rsvg is not None and not args.svg_only:
            to_png(svg, OUT / f"{shot.name}.png", rsvg)
        lines += [f"## {shot.name}", "", shot.what, "", f"![{shot.name}]({shot.name}.png)", ""]
        print(f"screenshots/{shot.name}.svg" + ("" if args.svg_only else " + .png"))
    (OUT / "README.md").write_text("\n".join(lines), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
