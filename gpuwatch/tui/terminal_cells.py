"""What the terminal shows, cell by cell, and updates written as the difference from it.

Textual repaints the whole screen (~27 kB at 160x50) whenever the layout changes (a pane that grows by a
line, a screen pushed or popped) and a widget's whole region when it refreshes. :class:`TerminalCells`
keeps what the terminal shows as this module last wrote it; every update, partial or full, writes only the
runs of cells that differ (with :class:`~gpuwatch.tui.terminal_output.SpanWriter`). Where an update moves
whole rows up or down (the panes under a plot that gave up rows, a finding's lines after one that went),
the terminal scrolls them in place (a scroll region, then SU or SD: ~15 bytes) before the difference is
written, as curses does. The cells are forgotten, and the next update written whole, when the screen's size
changes or the app comes back from a suspension, when the terminal may show something else.

While :attr:`TerminalCells.carry_pen` is on (the dashboard's driver turns it on for as long as it owns the
terminal, and writes a reset when it gives the terminal back), an update ends in the colours of its last
cell and the next one starts from them, as curses does: an update ending in a reset and starting with a
reset and both colours again cost ~10 bytes a frame, a few percent of what a tick writes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import repeat
from typing import cast

from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import Console
from rich.segment import Segment
from textual import _compositor

from gpuwatch.tui.terminal_output import (
    DEFAULT_PEN,
    Pen,
    Shown,
    SpanWriter,
    pen_of,
    render_spans,
    update_strips,
)

_ORIGINAL = getattr(_compositor.ChopsUpdate, "render_segments", None)
_ORIGINAL_LAYOUT = getattr(getattr(_compositor, "LayoutUpdate", None), "render_segments", None)
#: Unchanged cells between two changed runs up to which the runs are written as one: a cursor move and the
#: colours again cost about as many bytes.
MERGE_GAP = 4
#: Row moves are looked for only in an update that rewrites at least MOVE_MIN_ROWS runs of MOVE_MIN_WIDTH
#: cells or more (text that moved); a tick's figures and bar tips are runs of a few cells.
MOVE_MIN_ROWS, MOVE_MIN_WIDTH = 3, 40
#: The farthest a row move reaches, in rows (the plot gives up to 16 rows to the panes under it).
MOVE_MAX_ROWS = 20

Piece = tuple[int, int, list[Segment]]  # column, row, segments


class TerminalCells:
    """What the terminal shows, cell by cell (``None``: not known), as the writers below last wrote it."""

    def __init__(self) -> None:
        self.width = self.height = 0
        self.rows: list[list[Shown | None]] = []
        #: One object per distinct cell (a screen holds a few hundred): 8 000 cells cost their pointers only.
        self._interned: dict[Shown, Shown] = {}
        #: Updates leave the terminal in their last colours (:attr:`pen`), the next starts from them; off:
        #: each update ends in the default rendition, as Textual's own writer does.
        self.carry_pen = False
        #: The rendition the terminal was left in (None: not known).
        self.pen: Pen | None = None

    def forget(self, width: int = 0, height: int = 0) -> None:
        """Nothing known (the next update of each cell is written): a new size, or a terminal redrawn by
        another program."""
        self.width, self.height = width, height
        self.rows = [[None] * width for _ in range(height)]
        self._interned.clear()
        self.pen = None

    def writer(self, color_system: ColorSystem) -> SpanWriter:
        """A writer for the next update, starting from the rendition the last one left (when carried)."""
        return SpanWriter(color_system, self.pen if self.carry_pen else None)

    def finish(self, writer: SpanWriter) -> str:
        """The update's text; the rendition it leaves is kept for the next (when carried)."""
        out = writer.finish(reset=not self.carry_pen)
        self.pen = writer.pen if self.carry_pen else None
        return out

    def carry(self, on: bool) -> str:
        """Carry the rendition from one update to the next (on) or not (off: the text to write now, a reset
        when the terminal was left in other colours, so a shell or a suspended program gets it plain)."""
        left = self.pen
        self.carry_pen, self.pen = on, None
        return "\x1b[0m" if not on and left not in (None, DEFAULT_PEN) else ""

    def update(self, writer: SpanWriter, pieces: Iterable[Piece]) -> None:
        """Write ``pieces`` (segments from a column of a row): rows moved where that saves bytes, then the
        cells that differ from what is shown."""
        cells: list[tuple[int, int, list[Shown]]] = []
        for x0, y, segments in pieces:
            if y >= self.height or any(style is not None and style._link for _, style, _ in segments):
                self._write_whole(writer, x0, y, segments)  # a hyperlink keeps Textual's own rendering (OSC 8)
            else:
                cells.append((x0, y, self._cells(segments, writer.color_system)[:max(0, self.width - x0)]))
        if sum(1 for _, _, new in cells if len(new) >= MOVE_MIN_WIDTH) >= MOVE_MIN_ROWS:
            moved = self._move_rows(writer, cells)
            if moved:  # rows a scroll touched are written whole from what they should show
                cells = [c for c in cells if c[1] not in moved] + [(0, y, row) for y, row in sorted(moved.items())]
        intern = self._interned.setdefault
        runs: list[tuple[int, int, list[Shown]]] = []
        for x0, y, new in cells:
            row = self.rows[y]
            for start, end in self._runs(row, x0, new):
                runs.append((x0 + start, y, new[start:end]))
                row[x0 + start:x0 + end] = [intern(cell, cell) for cell in new[start:end]]
        write_by_pen(writer, runs)

    def _write_whole(self, writer: SpanWriter, x0: int, y: int, segments: list[Segment]) -> None:
        writer.move_to(x0, y)
        writer.write(segments)
        if y < self.height:
            row = self.rows[y]
            for x in range(x0, min(x0 + sum(cell_len(t) for t, _, _ in segments), self.width)):
                row[x] = None

    # -- row moves -----------------------------------------------------------------------------------------
    def _move_rows(self, writer: SpanWriter, cells: list[tuple[int, int, list[Shown]]]) -> dict[int, list[Shown]]:
        """Scroll blocks of rows whose wanted content is what another row shows now, best block first; the
        rows the scrolls touched, with what each should show."""
        wanted: list[list[Shown | None]] = [list(row) for row in self.rows]  # what every row should show
        for x0, y, new in cells:
            wanted[y][x0:x0 + len(new)] = new
        touched: set[int] = set()
        for _ in range(3):
            move = self._best_move(wanted)
            if move is None:
                break
            first, last, shift = move
            touched.update(range(min(first, first + shift), max(last, last + shift) + 1))
            self._scroll(writer, *move)
        return {y: cast(list[Shown], wanted[y]) for y in touched}  # _best_move keeps unknown cells out of these

    def _best_move(self, wanted: list[list[Shown | None]]) -> tuple[int, int, int] | None:
        """``(first, last, shift)``: rows ``first..last`` want what rows ``first+shift..last+shift`` show,
        the move that saves the most cells net of the rows it blanks (which must be rows whose every cell
        is known, to be written again), or None."""
        def key(row: list[Shown | None]) -> object:
            return object() if None in row else tuple(row)

        shown = [key(row) for row in self.rows]
        want = [key(row) for row in wanted]
        cost = [sum(a != b for a, b in zip(new, old, strict=False))
                for new, old in zip(wanted, self.rows, strict=False)]
        where: dict[object, list[int]] = {}
        for y, k in enumerate(shown):
            where.setdefault(k, []).append(y)
        best: tuple[int, tuple[int, int, int]] | None = None
        for shift in {s - y for y, k in enumerate(want) if cost[y] for s in where.get(k, ()) if s != y}:
            if abs(shift) > MOVE_MAX_ROWS:
                continue
            y = 0
            while y < self.height:
                if not self._lands(want, shown, y, shift):
                    y += 1
                    continue
                first = y
                while y + 1 < self.height and self._lands(want, shown, y + 1, shift):
                    y += 1
                blanked = range(y + 1, y + 1 + shift) if shift > 0 else range(first + shift, first)
                saved = sum(cost[first:y + 1]) - abs(shift) * self.width
                if saved > 0 and (best is None or saved > best[0]) and all(None not in wanted[r] for r in blanked):
                    best = (saved, (first, y, shift))
                y += 1
        return None if best is None else best[1]

    def _lands(self, want: list[object], shown: list[object], y: int, shift: int) -> bool:
        """Row ``y`` shows what it should once the rows move by ``shift``: it wants what row ``y+shift`` shows."""
        source = y + shift
        return 0 <= source < self.height and want[y] == shown[source]

    def _scroll(self, writer: SpanWriter, first: int, last: int, shift: int) -> None:
        """Rows ``first..last`` take the content of rows ``first+shift..last+shift``: a scroll region over both
        and SU (up, shift > 0) or SD (down); the rows scrolled in are blank, hence unknown."""
        top, bottom = (first, last + shift) if shift > 0 else (first + shift, last)
        n = abs(shift)
        writer.out.append(f"\x1b[{top + 1};{bottom + 1}r\x1b[{n}{'S' if shift > 0 else 'T'}\x1b[r")
        writer.row = -1  # setting the region moved the cursor home
        region = self.rows[top:bottom + 1]
        blank: list[list[Shown | None]] = [[None] * self.width for _ in range(n)]
        self.rows[top:bottom + 1] = region[n:] + blank if shift > 0 else blank + region[:-n]

    # -- cells ---------------------------------------------------------------------------------------------
    @staticmethod
    def _cells(segments: list[Segment], color_system: ColorSystem) -> list[Shown]:
        out: list[Shown] = []
        for text, style, _control in segments:
            if not text:
                continue
            pen = DEFAULT_PEN if style is None else pen_of(style, color_system)
            if cell_len(text) == len(text):
                out.extend(zip(text, repeat(pen)))  # the (character, pen) pairs built in C
            else:
                for ch in text:
                    width = cell_len(ch)
                    if width:
                        out.append((ch, pen))
                        out.extend(("", pen) for _ in range(width - 1))
        return out

    @staticmethod
    def _runs(row: list[Shown | None], x0: int, new: list[Shown]) -> list[tuple[int, int]]:
        """``[start, end)`` of ``new`` that differ from ``row`` (from ``x0``), runs ``MERGE_GAP`` apart
        joined, widened so no run begins or ends inside a wide character, old or new."""
        runs: list[tuple[int, int]] = []
        n = len(new)
        if row[x0:x0 + n] == new:  # compared in C: most of a span Textual sends is what the terminal shows
            return runs
        x = 0
        while x < n:
            if row[x0 + x] == new[x]:
                x += 1
                continue
            start = x
            while x < n and row[x0 + x] != new[x]:
                x += 1
            if runs and start - runs[-1][1] <= MERGE_GAP:
                start = runs.pop()[0]
            runs.append((start, x))
        widened: list[tuple[int, int]] = []
        for start, end in runs:
            while start > 0 and (new[start][0] == "" or (row[x0 + start] or ("x",))[0] == ""):
                start -= 1
            while end < n and (new[end][0] == "" or (row[x0 + end] or ("x",))[0] == ""):
                end += 1
            if widened and start <= widened[-1][1]:
                start = widened.pop()[0]
            widened.append((start, end))
        return widened


def write_by_pen(writer: SpanWriter, runs: list[tuple[int, int, list[Shown]]]) -> None:
    """Write ``runs`` (column, row, cells; in screen order, none overlapping) so that few colour codes are
    needed: next comes a run that starts in the colours the last one ended in, else the next in screen
    order. A tick's runs alternate a bar's colour and its figure's, row after row; in this order each
    colour is stated about once (a truecolor code is ~19 bytes, a cursor move 5-8)."""
    waiting: dict[Pen, deque[int]] = {}
    for i, (_, _, shown) in enumerate(runs):
        first = next((pen for ch, pen in shown if ch), None)
        if first is not None:
            waiting.setdefault(first, deque()).append(i)
    done = [False] * len(runs)
    following = 0
    for _ in range(len(runs)):
        same = waiting.get(writer.pen) if writer.pen is not None else None
        while same and done[same[0]]:
            same.popleft()
        if same:
            i = same.popleft()
        else:
            while done[following]:
                following += 1
            i = following
        done[i] = True
        x, y, shown = runs[i]
        writer.move_to(x, y)
        writer.put(shown)


#: The terminal the app draws on (one per process: a process runs one app on its terminal).
SCREEN = TerminalCells()


def forget() -> None:
    """The terminal was redrawn by someone else (the app was suspended): write the next update whole."""
    SCREEN.forget(SCREEN.width, SCREEN.height)


def render_changed_spans(update: _compositor.ChopsUpdate, console: Console) -> str:
    """Like :func:`~gpuwatch.tui.terminal_output.render_spans`, but only what differs from what is shown."""
    if SCREEN.height == 0:
        return render_spans(update, console)
    writer = SCREEN.writer(console._color_system or ColorSystem.TRUECOLOR)
    pieces: list[Piece] = [(x, y, list(strip)) for x, y, strip in update_strips(update)]
    SCREEN.update(writer, pieces)
    return SCREEN.finish(writer)


def render_changed_layout(update: _compositor.LayoutUpdate, console: Console) -> str:
    """A whole-screen update (a layout change, a screen pushed or popped): only what changed; everything
    when the screen's size is new."""
    region = update.region
    if (SCREEN.width, SCREEN.height) != (region.right, region.bottom):
        SCREEN.forget(region.right, region.bottom)
    writer = SCREEN.writer(console._color_system or ColorSystem.TRUECOLOR)
    pieces: list[Piece] = []
    for y, line in enumerate(update.strips, region.y):
        x = region.x
        for strip in line:
            pieces.append((x, y, list(strip)))
            x += strip.cell_length
    SCREEN.update(writer, pieces)
    return SCREEN.finish(writer)


def carry_pen(on: bool) -> str:
    """:meth:`TerminalCells.carry` of the terminal the app draws on."""
    return SCREEN.carry(on)


def install() -> bool:
    """Write Textual's updates through :data:`SCREEN`; ``False`` (Textual's own writers stay) when this
    Textual's update objects are not the shape this module knows."""
    chops = getattr(_compositor, "ChopsUpdate", None)
    layout = getattr(_compositor, "LayoutUpdate", None)
    if chops is None or layout is None or _ORIGINAL is None or _ORIGINAL_LAYOUT is None \
            or not {"chops", "spans", "chop_ends"} <= set(chops.__init__.__code__.co_varnames) \
            or not {"strips", "region"} <= set(layout.__init__.__code__.co_varnames):
        return False
    setattr(chops, "render_segments", render_changed_spans)  # noqa: B010 (mypy refuses assigning a method)
    setattr(layout, "render_segments", render_changed_layout)  # noqa: B010
    SCREEN.forget()
    return True


def uninstall() -> None:
    """Textual's own writers again (tests compare the two)."""
    if _ORIGINAL is not None:
        setattr(_compositor.ChopsUpdate, "render_segments", _ORIGINAL)  # noqa: B010
    if _ORIGINAL_LAYOUT is not None:
        setattr(_compositor.LayoutUpdate, "render_segments", _ORIGINAL_LAYOUT)  # noqa: B010
    SCREEN.forget()
