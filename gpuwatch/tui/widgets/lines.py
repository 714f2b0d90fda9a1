"""A widget drawn as a list of lines, of which only the cells that changed are redrawn.

Textual redraws the whole region of a widget that calls ``refresh()``. Most of the dashboard changes a
few numbers per second, so these widgets compare each new line with the old one and refresh only the
span from its first changed cell to its last: Textual composes only that, and the terminal receives only
the cells in it that differ from what it shows (no flicker, few bytes; see
:mod:`gpuwatch.tui.terminal_cells`). The span is found by comparing whole strings (a line's characters,
and its styles one character per cell), not cell by cell in Python: this runs for every changed line of
every tick. The widget's own style is computed once until Textual says its styles changed.
"""

from __future__ import annotations

from itertools import repeat

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

#: Unchanged cells between two changed runs of a line up to which the runs are written as one: moving the
#: cursor and restating the colours costs about as many bytes as rewriting a few cells.
MERGE_GAP = 6

Cell = tuple[str, Style | None]


def cells(strip: Strip) -> list[Cell]:
    """One ``(character, style)`` per terminal cell (a wide character's second cell is ``("", style)``)."""
    out: list[Cell] = []
    for text, style, _ in strip:
        if cell_len(text) == len(text):
            out.extend(zip(text, repeat(style)))
        else:
            for ch in text:
                out.append((ch, style))
                out.extend(("", style) for _ in range(cell_len(ch) - 1))
    return out


#: One character per distinct style (``changed_span`` compares a line's styles as a string).
_STYLE_CHARS: dict[Style | None, str] = {}


def _style_char(style: Style | None) -> str:
    char = _STYLE_CHARS.get(style)
    if char is None:
        if len(_STYLE_CHARS) >= 50_000:  # a theme has a few hundred: this never fills in practice
            _STYLE_CHARS.clear()
        char = _STYLE_CHARS[style] = chr(0x10000 + len(_STYLE_CHARS))
    return char


def _keys(strip: Strip) -> tuple[str, str] | None:
    """A line's characters and its styles (one character each per cell); ``None`` when a character is not
    one cell wide (then the cells are compared one by one)."""
    chars: list[str] = []
    styles: list[str] = []
    for text, style, _ in strip:
        if cell_len(text) != len(text):
            return None
        chars.append(text)
        styles.append(_style_char(style) * len(text))
    return "".join(chars), "".join(styles)


def _common_prefix(a: str, b: str) -> int:
    """Length of the common start of ``a`` and ``b``, by halving (string comparisons run in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def changed_span(old: Strip, new: Strip) -> tuple[int, int] | None:
    """``[start, end)`` from the first cell where ``new`` differs from ``old`` to the last (character or
    style); ``None`` when they show the same cells."""
    a, b = _keys(old), _keys(new)
    if a is None or b is None:
        runs = changed_runs(cells(old), cells(new))
        return (runs[0][0], runs[-1][1]) if runs else None
    (chars_a, styles_a), (chars_b, styles_b) = a, b
    if chars_a == chars_b and styles_a == styles_b:
        return None
    start = min(_common_prefix(chars_a, chars_b), _common_prefix(styles_a, styles_b))
    tail = min(_common_prefix(chars_a[::-1], chars_b[::-1]), _common_prefix(styles_a[::-1], styles_b[::-1]))
    end = max(len(chars_a), len(chars_b)) - tail
    return (start, max(end, start + 1))


def changed_runs(old: list[Cell], new: list[Cell], gap: int = MERGE_GAP) -> list[tuple[int, int]]:
    """``[start, end)`` cell ranges where ``new`` differs from ``old``; runs closer than ``gap`` merge."""
    runs: list[tuple[int, int]] = []
    width = max(len(old), len(new))
    x = 0
    while x < width:
        if x < len(old) and x < len(new) and old[x] == new[x]:
            x += 1
            continue
        start = x
        while x < width and not (x < len(old) and x < len(new) and old[x] == new[x]):
            x += 1
        if runs and start - runs[-1][1] <= gap:
            runs[-1] = (runs[-1][0], x)
        else:
            runs.append((start, x))
    return runs


class LinesWidget(Widget):
    """Subclasses call :meth:`set_lines`; ``render_line`` serves cached strips."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._texts: list[Text] = []
        self._strips: dict[int, Strip] = {}
        self._strip_width = -1
        self._base: Style | None = None  # the widget's own style, computed once per update (walks the DOM)
        self.line_refreshes = 0

    def on_mount(self) -> None:
        self.watch(self.app, "theme", lambda _: self.repaint(), init=False)

    def repaint(self) -> None:
        """Drop every cached line (the theme, hence the base style, changed)."""
        self._strips.clear()
        self._base = None
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = None  # a class, a pseudo-class or the theme changed here or above: computed again

    def set_lines(self, lines: list[Text]) -> None:
        """Show ``lines``; refresh only the span of each line whose characters or styles changed."""
        size = self.size
        width = size.width
        old = self._texts
        self._texts = lines
        if width <= 0:
            return
        if width != self._strip_width:
            self._strips.clear()
            self._strip_width = width
            self.refresh()
            return
        regions: list[Region] = []
        for y in range(max(len(old), len(lines))):
            if y < len(old) and y < len(lines) and old[y] == lines[y] and old[y].style == lines[y].style:
                continue
            before = self._strips.pop(y, None)
            self.line_refreshes += 1
            if before is None or y >= size.height:
                regions.append(Region(0, y, width, 1))
                continue
            span = changed_span(before, self._strip(y, width))
            if span is not None:
                regions.append(Region(span[0], y, span[1] - span[0], 1))
        if regions:
            self.refresh(*regions)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._strip_width:
            self._strips.clear()
            self._strip_width = width
            self._base = None
        return self._strip(y, width)

    def _strip(self, y: int, width: int) -> Strip:
        strip = self._strips.get(y)
        if strip is None:
            if self._base is None:
                self._base = self.rich_style
            base = self._base
            if y < len(self._texts):
                segments = list(self._texts[y].render(self.app.console, end=""))
                strip = Strip(segments).crop(0, width).extend_cell_length(width).apply_style(base)
            else:
                strip = Strip.blank(width, base)
            self._strips[y] = strip
        return strip

    @property
    def plain(self) -> str:
        """What the widget shows, as plain text (for tests and screen readers of logs)."""
        return "\n".join(t.plain for t in self._texts)

    @staticmethod
    def split(text: Text) -> list[Text]:
        return list(text.split("\n", allow_blank=True))


class TextLine(LinesWidget):
    """One line of text (the status line): repainted only when its text changes, never re-laid out."""

    DEFAULT_CSS = "TextLine { height: 1; }"

    def show(self, text: Text) -> None:
        self.set_lines([text])
