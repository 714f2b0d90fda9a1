"""What a partial screen update writes to the terminal: only the cells that changed, in few escape codes.

Textual turns the regions widgets refresh into spans per screen line and writes each span. It writes
every span from the left edge of the widget it falls in (its own note says "crop to x extents"), so a
number that changed at the right of a 160-column line resent the whole line, and it wraps every segment
in its own colour code and reset, even when the next segment has the same colours. At one tick a second
the dashboard wrote ~3 kB/s where nvitop (curses) writes ~0.3 kB/s.

:func:`install` replaces Textual's partial-update writer with one that writes each span from its first
cell and emits only the colour codes that change from one segment (and span) to the next. The screen the
terminal shows is the same (tests compare a real terminal's screen, tmux's, with the app's own render).

Textual repaints the whole screen (~27 kB at 160x50) whenever the layout changes: a pane that grows by a
line, a screen pushed or popped. :class:`TerminalCells` keeps what the terminal shows, cell by cell, as
this module last wrote it, and every update, partial or full, writes only the runs of cells that differ
from it. The cells are forgotten (and the next update written whole) when the screen's size changes or the
app comes back from a suspension, when the terminal may show something else.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual import _compositor
from textual.strip import Strip

_ORIGINAL = getattr(_compositor.ChopsUpdate, "render_segments", None)
_ORIGINAL_LAYOUT = getattr(_compositor, "LayoutUpdate", None) and getattr(_compositor.LayoutUpdate, "render_segments", None)
#: Unchanged cells between two changed runs up to which the runs are written as one: a cursor move and the
#: colours again cost about as many bytes.
MERGE_GAP = 4


#: SGR codes of Rich's attribute bits, in bit order (bold, dim, italic, underline, blink, blink2, reverse,
#: conceal, strike, underline2, frame, encircle, overline).
ATTRIBUTE_CODES = ("1", "2", "3", "4", "5", "6", "7", "8", "9", "21", "51", "52", "53")


class Pen(NamedTuple):
    """The terminal's current rendition: attribute bits and the SGR codes of the two colours."""

    attributes: int
    fg: str
    bg: str


DEFAULT_PEN = Pen(0, "", "")
#: One terminal cell as written: its character ("" for the second cell of a wide one) and rendition.
Shown = tuple[str, Pen]


@lru_cache(maxsize=4096)
def pen_of(style: Style, color_system: ColorSystem) -> Pen:
    color, bgcolor = style.color, style.bgcolor
    return Pen(style._attributes & style._set_attributes,
               "" if color is None else ";".join(color.downgrade(color_system).get_ansi_codes()),
               "" if bgcolor is None else ";".join(bgcolor.downgrade(color_system).get_ansi_codes(False)))


#: Bit -> (the SGR code that turns it off, the bits that code turns off). Bold and dim share 22, the
#: underlines 24 and the blinks 25. Frame, encircle and overline have none here: a reset turns them off.
ATTRIBUTE_OFF = {0: ("22", 0b11), 1: ("22", 0b11), 2: ("23", 1 << 2), 3: ("24", 1 << 3 | 1 << 9),
                 4: ("25", 1 << 4 | 1 << 5), 5: ("25", 1 << 4 | 1 << 5), 6: ("27", 1 << 6), 7: ("28", 1 << 7),
                 8: ("29", 1 << 8), 9: ("24", 1 << 3 | 1 << 9)}


def _codes(attributes: int) -> list[str]:
    return [code for bit, code in enumerate(ATTRIBUTE_CODES) if attributes & (1 << bit)]


def transition(old: Pen | None, new: Pen) -> str:
    """The shortest SGR sequence from ``old`` (``None``: unknown) to ``new``: only what changed (an
    attribute that goes off by its own "off" code), or a reset and the whole of ``new``."""
    if old == new:
        return ""
    removed = old.attributes & ~new.attributes if old is not None else 0
    if old is None or any(removed & (1 << bit) and bit not in ATTRIBUTE_OFF for bit in range(removed.bit_length())):
        codes = ["0", *_codes(new.attributes), *([new.fg] if new.fg else []), *([new.bg] if new.bg else [])]
        return f"\x1b[{';'.join(codes)}m"
    codes = []
    state = old.attributes
    for bit in range(removed.bit_length()):
        if removed & (1 << bit) and state & (1 << bit):
            code, mask = ATTRIBUTE_OFF[bit]
            codes.append(code)
            state &= ~mask
    codes += _codes(new.attributes & ~state)  # what is new, and what an off code took along (dim with bold)
    if new.fg != old.fg:
        codes.append(new.fg or "39")
    if new.bg != old.bg:
        codes.append(new.bg or "49")
    return f"\x1b[{';'.join(codes)}m"


def render_spans(update: _compositor.ChopsUpdate, console: Console) -> str:
    """The terminal sequence for ``update`` (a :class:`textual._compositor.ChopsUpdate`)."""
    color_system = console._color_system or ColorSystem.TRUECOLOR
    writer = SpanWriter(color_system)
    chops, chop_ends = update.chops, update.chop_ends
    for y, x1, x2 in update.spans:
        for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start, stop = max(x, x1), min(end, x2)
            if start != x or stop != end:
                strip = strip.crop(start - x, stop - x)
            writer.move_to(start, y)
            writer.write(strip)
    return writer.finish()


class SpanWriter:
    """Terminal text for spans of segments, restating colours only where they change."""

    def __init__(self, color_system: ColorSystem) -> None:
        self.color_system = color_system
        self.pen: Pen | None = None  # unknown until the first code
        self.row = -1  # the cursor's row, once a span moved it there
        self.out: list[str] = []

    def move_to(self, x: int, y: int) -> None:
        """Cursor to column ``x`` of row ``y``: on the row already written, the column alone (CHA, ~3 bytes
        fewer than a full position; absolute, so a character of unexpected width cannot shift it)."""
        self.out.append(f"\x1b[{x + 1}G" if y == self.row else f"\x1b[{y + 1};{x + 1}H")
        self.row = y

    def write(self, segments: Iterable[Segment]) -> None:
        out = self.out
        for text, style, _control in segments:
            if not text:
                continue
            if style is not None and style._link:  # hyperlinks keep Textual's own rendering (OSC 8)
                out.append(transition(self.pen, DEFAULT_PEN))
                out.append(Strip.render_style(style, text, self.color_system))
                self.pen = DEFAULT_PEN
                continue
            out.append(transition(self.pen, DEFAULT_PEN if style is None else pen_of(style, self.color_system)))
            self.pen = DEFAULT_PEN if style is None else pen_of(style, self.color_system)
            out.append(text)

    def put(self, shown: list[Shown]) -> None:
        """Cells as :class:`TerminalCells` keeps them (the second cell of a wide character is skipped)."""
        out = self.out
        for ch, pen in shown:
            if not ch:
                continue
            if pen != self.pen:
                out.append(transition(self.pen, pen))
                self.pen = pen
            out.append(ch)

    def finish(self) -> str:
        """Everything written, ending in the default rendition (as Textual's own writer leaves it)."""
        if self.pen not in (None, DEFAULT_PEN):
            self.out.append("\x1b[0m")
        return "".join(self.out)


class TerminalCells:
    """What the terminal shows, cell by cell (``None``: not known), as the writers below last wrote it."""

    def __init__(self) -> None:
        self.width = self.height = 0
        self.rows: list[list[Shown | None]] = []

    def forget(self, width: int = 0, height: int = 0) -> None:
        """Nothing known (the next update of each cell is written): a new size, or a terminal redrawn by
        another program."""
        self.width, self.height = width, height
        self.rows = [[None] * width for _ in range(height)]

    def write(self, writer: SpanWriter, x0: int, y: int, segments: Iterable[Segment]) -> None:
        """Write the cells of ``segments`` from column ``x0`` of row ``y`` that differ from what is shown."""
        segments = list(segments)
        if y >= self.height or any(style is not None and style._link for _, style, _ in segments):
            writer.move_to(x0, y)  # a hyperlink keeps Textual's own rendering: written whole, then unknown
            writer.write(segments)
            if y < self.height:
                row = self.rows[y]
                for x in range(x0, min(x0 + sum(cell_len(t) for t, _, _ in segments), self.width)):
                    row[x] = None
            return
        new = self._cells(segments, writer.color_system)
        row = self.rows[y]
        end_x = min(x0 + len(new), self.width)
        new = new[:end_x - x0]
        for start, end in self._runs(row, x0, new):
            writer.move_to(x0 + start, y)
            writer.put(new[start:end])
            row[x0 + start:x0 + end] = new[start:end]

    @staticmethod
    def _cells(segments: list[Segment], color_system: ColorSystem) -> list[Shown]:
        out: list[Shown] = []
        for text, style, _control in segments:
            if not text:
                continue
            pen = DEFAULT_PEN if style is None else pen_of(style, color_system)
            if cell_len(text) == len(text):
                out.extend((ch, pen) for ch in text)
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
        widened = []
        for start, end in runs:
            while start > 0 and (new[start][0] == "" or (row[x0 + start] or ("x",))[0] == ""):
                start -= 1
            while end < n and (new[end][0] == "" or (row[x0 + end] or ("x",))[0] == ""):
                end += 1
            if widened and start <= widened[-1][1]:
                start = widened.pop()[0]
            widened.append((start, end))
        return widened


#: The terminal the app draws on (one per process: a process runs one app on its terminal).
SCREEN = TerminalCells()


def forget() -> None:
    """The terminal was redrawn by someone else (the app was suspended): write the next update whole."""
    SCREEN.forget(SCREEN.width, SCREEN.height)


def render_changed_spans(update: _compositor.ChopsUpdate, console: Console) -> str:
    """Like :func:`render_spans`, but only the cells that differ from what the terminal shows."""
    if SCREEN.height == 0:
        return render_spans(update, console)
    writer = SpanWriter(console._color_system or ColorSystem.TRUECOLOR)
    chops, chop_ends = update.chops, update.chop_ends
    for y, x1, x2 in update.spans:
        for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start, stop = max(x, x1), min(end, x2)
            if start != x or stop != end:
                strip = strip.crop(start - x, stop - x)
            SCREEN.write(writer, start, y, strip)
    return writer.finish()


def render_changed_layout(update: _compositor.LayoutUpdate, console: Console) -> str:
    """A whole-screen update (a layout change, a screen pushed or popped): only the cells that changed; all
    of them when the screen's size is new."""
    region = update.region
    if (SCREEN.width, SCREEN.height) != (region.right, region.bottom):
        SCREEN.forget(region.right, region.bottom)
    writer = SpanWriter(console._color_system or ColorSystem.TRUECOLOR)
    for y, line in enumerate(update.strips, region.y):
        x = region.x
        for strip in line:
            SCREEN.write(writer, x, y, strip)
            x += strip.cell_length
    return writer.finish()


def install() -> bool:
    """Use :func:`render_spans` for Textual's partial updates; ``False`` (Textual's own writer stays) when
    this Textual's update object is not the shape this module knows."""
    cls = getattr(_compositor, "ChopsUpdate", None)
    if cls is None or _ORIGINAL is None or not {"chops", "spans", "chop_ends"} <= set(
            cls.__init__.__code__.co_varnames):
        return False
    setattr(cls, "render_segments", render_changed_spans)  # noqa: B010 (mypy refuses assigning a method)
    layout = getattr(_compositor, "LayoutUpdate", None)
    if layout is not None and _ORIGINAL_LAYOUT is not None and {"strips", "region"} <= set(
            layout.__init__.__code__.co_varnames):
        setattr(layout, "render_segments", render_changed_layout)  # noqa: B010
    SCREEN.forget()
    return True


def uninstall() -> None:
    """Textual's own writer again (tests compare the two)."""
    if _ORIGINAL is not None:
        setattr(_compositor.ChopsUpdate, "render_segments", _ORIGINAL)  # noqa: B010
    if _ORIGINAL_LAYOUT is not None:
        setattr(_compositor.LayoutUpdate, "render_segments", _ORIGINAL_LAYOUT)  # noqa: B010
    SCREEN.forget()
