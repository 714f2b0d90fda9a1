"""What a partial screen update writes to the terminal: only the cells that changed, in few escape codes.

Textual turns the regions widgets refresh into spans per screen line and writes each span. It writes
every span from the left edge of the widget it falls in (its own note says "crop to x extents"), so a
number that changed at the right of a 160-column line resent the whole line, and it wraps every segment
in its own colour code and reset, even when the next segment has the same colours. At one tick a second
the dashboard wrote ~3 kB/s where nvitop (curses) writes ~0.3 kB/s.

:func:`install` replaces Textual's partial-update writer with one that writes each span from its first
cell and emits only the colour codes that change from one segment (and span) to the next. The screen the
terminal shows is the same (tests compare a real terminal's screen, tmux's, with the app's own render).

:mod:`gpuwatch.tui.terminal_cells` installs these writers in Textual, behind its record of what the
terminal shows: only the cells that differ from it are written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import NamedTuple

from rich.color import ColorSystem
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual import _compositor
from textual.strip import Strip

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


def update_strips(update: _compositor.ChopsUpdate) -> Iterator[tuple[int, int, Strip]]:
    """``(x, y, strip)`` for each piece of ``update`` that falls inside its spans, cropped to them."""
    chops, chop_ends = update.chops, update.chop_ends
    for y, x1, x2 in update.spans:
        for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start, stop = max(x, x1), min(end, x2)
            if start != x or stop != end:
                strip = strip.crop(start - x, stop - x)
            yield start, y, strip


def render_spans(update: _compositor.ChopsUpdate, console: Console) -> str:
    """The terminal sequence for ``update`` (a :class:`textual._compositor.ChopsUpdate`)."""
    color_system = console._color_system or ColorSystem.TRUECOLOR
    writer = SpanWriter(color_system)
    for x, y, strip in update_strips(update):
        writer.move_to(x, y)
        writer.write(strip)
    return writer.finish()


class SpanWriter:
    """Terminal text for spans of segments, restating colours only where they change."""

    def __init__(self, color_system: ColorSystem, pen: Pen | None = None) -> None:
        self.color_system = color_system
        self.pen: Pen | None = pen  # the terminal's rendition before the first code (None: unknown)
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
        """Cells as :class:`~gpuwatch.tui.terminal_cells.TerminalCells` keeps them (the second cell of a wide
        character is skipped: the first covers it)."""
        out = self.out
        for ch, pen in shown:
            if not ch:
                continue
            if pen != self.pen:
                out.append(transition(self.pen, pen))
                self.pen = pen
            out.append(ch)

    def finish(self, reset: bool = True) -> str:
        """Everything written, ending in the default rendition (as Textual's own writer leaves it) unless
        ``reset`` is false (then :attr:`pen` is the rendition the terminal is left in)."""
        if reset and self.pen not in (None, DEFAULT_PEN):
            self.out.append("\x1b[0m")
            self.pen = DEFAULT_PEN
        return "".join(self.out)
