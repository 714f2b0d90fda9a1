"""Where the dashboard's terminal bytes go: each byte of its pty stream attributed to the pane it repaints.

``gpuwatch tui --replay`` runs in a fresh pty (as ``benchmarks/tui_cost.py`` runs it) and its output is
kept; after the warm-up a small terminal emulator replays the stream, following the cursor, and counts for
each pane the bytes written there, the frames that touched it, the cells written and the cells whose
character or rendition actually changed (a cell rewritten unchanged is waste). Panes are found on the
emulated screen itself: the status line, the banner, the GPU panel and the history plot (left and right of
the top rows), the process table, the bordered panes by their titles, and the footer.

    python benchmarks/tui_bytes.py                      # 60 s of the bundled recording at 160x50
    python benchmarks/tui_bytes.py --seconds 30 --baseline /tmp/main   # also another checkout
"""

from __future__ import annotations

import argparse
import bisect
import re
import sys
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests", ROOT / "tests" / "tui"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from benchmarks.procs import start_in_pty  # noqa: E402
from benchmarks.tui_cost import PY, recording  # noqa: E402

_TOKEN = re.compile(rb"\x1b\[([0-?]*)([ -/]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x1f]|"
                    rb"[^\x00-\x1f\x1b]+")


def width_of(ch: str) -> int:
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 0 if unicodedata.combining(ch) else 1


@dataclass
class Tally:
    bytes: int = 0
    cells_written: int = 0
    cells_changed: int = 0
    frames: set[int] = field(default_factory=set)


class Screen:
    """Characters and renditions of a ``cols`` x ``rows`` terminal, fed the byte stream of a program."""

    def __init__(self, cols: int, rows: int) -> None:
        self.cols, self.rows = cols, rows
        self.chars = [[" "] * cols for _ in range(rows)]
        self.pens = [[""] * cols for _ in range(rows)]
        self.x = self.y = 0
        self.pen = ""
        self.top, self.bottom = 0, rows - 1
        #: Per (row, column): bytes written, cells written, cells changed, frames; reset by ``reset``.
        self.bytes: Counter[tuple[int, int]] = Counter()
        self.written: Counter[tuple[int, int]] = Counter()
        self.changed: Counter[tuple[int, int]] = Counter()
        self.frames: dict[tuple[int, int], set[int]] = defaultdict(set)
        self.frame = 0
        self._counting = False

    def reset(self) -> None:
        self.bytes.clear()
        self.written.clear()
        self.changed.clear()
        self.frames.clear()

    def feed(self, data: bytes, frame_of: Callable[[int], int], start: int = 0) -> None:
        """Replay ``data``; ``frame_of(offset)``: the frame (pty read) a token starting there came in; the
        tallies start at offset ``start``."""
        for m in _TOKEN.finditer(data):
            if not self._counting and m.start() >= start:
                self._counting = True
                self.reset()
            self.frame = frame_of(m.start())
            token = m.group(0)
            at = (min(self.y, self.rows - 1), min(self.x, self.cols - 1))
            if token.startswith(b"\x1b["):
                self._csi(m.group(1).decode(), m.group(3).decode())
                at = (min(self.y, self.rows - 1), min(self.x, self.cols - 1))
            elif token == b"\r":
                self.x = 0
            elif token == b"\n":
                self.y = min(self.y + 1, self.rows - 1)
            elif not token.startswith(b"\x1b") and token[0] >= 0x20:
                self._text(token.decode(errors="replace"))
                continue
            self.bytes[at] += len(token)

    def _csi(self, params: str, final: str) -> None:
        nums = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else []
        if final == "H":
            self.y = max(1, nums[0] if nums else 1) - 1
            self.x = max(1, nums[1] if len(nums) > 1 else 1) - 1
        elif final == "G":
            self.x = max(1, nums[0] if nums else 1) - 1
        elif final == "m":
            self.pen = "" if params in ("", "0") else f"{self.pen};{params}" if not params.startswith("0;") else params
        elif final == "r":  # a scroll region (the cursor goes home)
            self.top = max(1, nums[0] if nums else 1) - 1
            self.bottom = (nums[1] if len(nums) > 1 and nums[1] else self.rows) - 1
            self.x = self.y = 0
        elif final in "ST":  # scroll the region up (S) or down (T); blank lines come in
            n = max(1, nums[0] if nums else 1)
            for grid, blank in ((self.chars, " "), (self.pens, "?")):
                region = grid[self.top:self.bottom + 1]
                fill = [[blank] * self.cols for _ in range(min(n, len(region)))]
                grid[self.top:self.bottom + 1] = (region[n:] + fill) if final == "S" else (fill + region[:-n])
        elif final == "J" and params == "2":
            self.chars = [[" "] * self.cols for _ in range(self.rows)]

    def _text(self, text: str) -> None:
        for ch in text:
            w = width_of(ch)
            if w == 0:
                continue
            y, x = self.y, self.x
            if y < self.rows and x < self.cols:
                key = (y, x)
                self.bytes[key] += len(ch.encode())
                self.written[key] += 1
                self.frames[key].add(self.frame)
                if self.chars[y][x] != ch or self.pens[y][x] != self.pen:
                    self.changed[key] += 1
                self.chars[y][x], self.pens[y][x] = ch, self.pen
                for extra in range(1, w):
                    if x + extra < self.cols:
                        self.chars[y][x + extra] = ""
            self.x += w

    def line(self, y: int) -> str:
        return "".join(self.chars[y])


def panes(screen: Screen) -> dict[tuple[int, int], str]:
    """The pane of each cell, read off the screen: rows by what they show, the top rows split at the plot."""
    names: dict[int, str] = {0: "status line", screen.rows - 1: "footer"}
    y = 1
    if "RECORDING" in screen.line(1) or "recording" in screen.line(1):
        names[1] = "banner"
        y = 2
    procs_header = next((r for r in range(y, screen.rows) if screen.line(r).lstrip().startswith("PID")), None)
    for r in range(y, procs_header if procs_header is not None else y):
        names[r] = "top"
    current = "process table"
    for r in range(procs_header if procs_header is not None else y, screen.rows - 1):
        line = screen.line(r)
        if "╭─ Alerts" in line and "╭─ Diagnosis" in line:
            current = "alerts|diagnosis"
        elif "╭─ Alerts" in line:
            current = "alerts pane"
        elif "╭─ Diagnosis" in line:
            current = "diagnosis pane"
        names[r] = current
    split = screen.line(names and next((r for r, n in names.items() if n == "top"), 2)).find(" util ")
    out: dict[tuple[int, int], str] = {}
    for r in range(screen.rows):
        name = names.get(r, "other")
        for x in range(screen.cols):
            if name == "top":
                out[(r, x)] = "history plot" if x >= screen.cols // 2 + 1 or (split > 0 and x >= split) else "GPU panel"
            elif name == "alerts|diagnosis":
                out[(r, x)] = "alerts pane" if x < screen.cols // 2 else "diagnosis pane"
            else:
                out[(r, x)] = name
    return out


def analyse(raw: bytes, index: list[tuple[float, int]], cols: int, rows: int, warmup: float) -> dict[str, object]:
    """Per pane over the stream after ``warmup`` s: bytes, frames, cells written and changed."""
    screen = Screen(cols, rows)
    offsets = [o for _, o in index]
    first = next((i for i, (t, _) in enumerate(index) if t >= warmup), len(index))
    t_start = index[first][0] if first < len(index) else 0.0
    t_end = index[-1][0] if index else 0.0
    screen.feed(raw, lambda at: bisect.bisect_right(offsets, at) - 1,
                offsets[first] if first < len(index) else len(raw))
    where = panes(screen)
    tallies: dict[str, Tally] = defaultdict(Tally)
    for key, n in screen.bytes.items():
        tallies[where.get(key, "other")].bytes += n
    for key, n in screen.written.items():
        tallies[where.get(key, "other")].cells_written += n
    for key, n in screen.changed.items():
        tallies[where.get(key, "other")].cells_changed += n
    for key, frames in screen.frames.items():
        tallies[where.get(key, "other")].frames |= frames
    seconds = max(t_end - t_start, 1e-9)
    return {"seconds": round(seconds, 1), "frames": len({i for i, (t, _) in enumerate(index) if t >= t_start}),
            "bytes": sum(t.bytes for t in tallies.values()),
            "panes": {name: {"bytes_per_s": round(t.bytes / seconds, 1), "frames": len(t.frames),
                             "cells_written": t.cells_written, "cells_changed": t.cells_changed}
                      for name, t in sorted(tallies.items(), key=lambda kv: -kv[1].bytes)},
            "screen": [screen.line(r) for r in range(rows)],
            "rows": {r: {"bytes": sum(n for (y, _), n in screen.bytes.items() if y == r),
                         "frames": len(set().union(*(f for (y, _), f in screen.frames.items() if y == r)))}
                     for r in range(rows)}}


def capture(cwd: Path, rec: Path, seconds: float, warmup: float, cols: int, rows: int, out: Path) -> dict[str, object]:
    cmd = [PY, "-m", "gpuwatch", "tui", "--replay", str(rec), "--loop", "--speed", "1", "--interval", "1"]
    proc = start_in_pty("tui", cmd, cols=cols, rows=rows, env={"TEXTUAL_ANIMATIONS": "none"}, cwd=cwd, record=out)
    try:
        time.sleep(warmup + seconds)
    finally:
        proc.stop()
    index = [(float(t), int(o)) for t, o in (line.split() for line in Path(f"{out}.index").read_text().splitlines())]
    return analyse(out.read_bytes(), index, cols, rows, warmup)


def report(name: str, result: dict[str, object]) -> str:
    lines = [f"{name}: {result['bytes']} bytes in {result['seconds']} s "
             f"({float(result['bytes']) / float(result['seconds']):.0f} B/s), {result['frames']} frames",  # type: ignore[arg-type]
             f"  {'pane':16} {'B/s':>7} {'frames':>7} {'cells written':>14} {'changed':>8}"]
    for pane, t in result["panes"].items():  # type: ignore[attr-defined]
        lines.append(f"  {pane:16} {t['bytes_per_s']:>7} {t['frames']:>7} {t['cells_written']:>14} "
                     f"{t['cells_changed']:>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="window analysed (default 60)")
    p.add_argument("--warmup", type=float, default=8.0, help="seconds before the window (default 8)")
    p.add_argument("--cols", type=int, default=160)
    p.add_argument("--rows", type=int, default=50)
    p.add_argument("--replay", metavar="FILE", help="recording to replay (default: bundled, else synthetic)")
    p.add_argument("--baseline", metavar="DIR", help="also capture the dashboard of another checkout")
    p.add_argument("--keep", metavar="DIR", help="keep the raw streams here")
    p.add_argument("--screen", action="store_true", help="print the emulated screen at the end")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        keep = Path(args.keep or tmp)
        keep.mkdir(parents=True, exist_ok=True)
        rec = recording(args.replay, Path(tmp))
        runs = [("this checkout", ROOT)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
        for name, cwd in runs:
            result = capture(cwd, rec, args.seconds, args.warmup, args.cols, args.rows,
                             keep / f"{name.replace(' ', '_')}.tty")
            print(report(name, result))
            if args.screen:
                for r, line in enumerate(result["screen"]):  # type: ignore[arg-type]
                    row = result["rows"][r]  # type: ignore[index]
                    print(f"{row['bytes']:>6} {row['frames']:>3} |{line.rstrip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
