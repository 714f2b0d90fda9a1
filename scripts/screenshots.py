"""Regenerate screenshots/ (SVG and PNG) of the dashboard from the bundled H200 recording.

    .venv/bin/python scripts/screenshots.py            # all screenshots
    .venv/bin/python scripts/screenshots.py --svg-only # no PNG conversion
    .venv/bin/python scripts/screenshots.py --text NAME   # one of TEXT_SHOTS as plain text (README samples)

The app is built by the same factory as ``gpuwatch tui --replay``; the recording is played up to a fixed
point before the screen is taken, so the pictures are reproducible. PNGs are converted with
``rsvg-convert`` (Debian/Ubuntu: ``apt-get install librsvg2-bin``), which renders Textual's SVGs with a
monospace font; non-breaking spaces are made plain first because librsvg drops leading ones.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

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
    Shot("paused-4-min-back-160x50", 400, (160, 50), ("less_than_sign",) * 4,
         what="after the fixes, paused and four minutes back in time: the naive service as it was, judged then"),
)

#: Screens the README shows as text (``--text NAME``), not pictures.
TEXT_SHOTS = (
    Shot("paused-4-min-back-120x34", 400, (120, 34), ("less_than_sign",) * 4,
         what="after the fixes, paused and four minutes back: the naive service as it was, judged then"),
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


async def take(shot: Shot, recording: Path, as_text: bool = False) -> str:
    feed = local_feed(Sampler(RecordingProducer(recording)), f"recording: {recording.name}", True, run_sampler=False)
    feed.prime(shot.ticks)
    app = make_app(feed)
    async with app.run_test(size=shot.size) as pilot:
        await pilot.pause()
        for key in shot.keys:
            await pilot.press(key)
        await pilot.pause(0.2)
        return screen_text(app) if as_text else app.export_screenshot(title=f"gpuwatch · {shot.name}")


def screen_text(app: Any) -> str:
    """The screen's characters, as a terminal capture has them (no colour, no trailing blanks); drawn as
    ``export_screenshot`` draws the SVG."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
                      color_system=None, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    lines = console.export_text().replace("\u00a0", " ").splitlines()
    return "\n".join(line.rstrip() for line in lines).rstrip("\n") + "\n"


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
    p.add_argument("--text", choices=[s.name for s in TEXT_SHOTS], help="print this screen as text, write nothing")
    args = p.parse_args(argv)
    if args.text:
        shot = next(s for s in TEXT_SHOTS if s.name == args.text)
        sys.stdout.write(asyncio.run(take(shot, args.recording, as_text=True)))
        return 0
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
