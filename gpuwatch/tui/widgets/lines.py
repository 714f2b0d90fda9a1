"""A widget drawn as a list of lines, of which only the cells that changed are redrawn.

Textual redraws the whole region of a widget that calls ``refresh()``. Most of the dashboard changes a
few numbers per second, so these widgets compare each new line with the old one cell by cell and refresh
only the runs of cells that differ: the terminal receives only what changed (no flicker, few bytes; see
:mod:`gpuwatch.tui.terminal_output` for how a run is written).
"""

from __future__ import annotations

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
            out.extend((ch, style) for ch in text)
        else:
            for ch in text:
                out.append((ch, style))
                out.extend(("", style) for _ in range(cell_len(ch) - 1))
    return out


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

    def set_lines(self, lines: list[Text]) -> None:
        """Show ``lines``; refresh only the cells whose character or style changed."""
        width = self.size.width
        old = self._texts
        self._texts = lines
        self._base = None
        if width <= 0:
            return
        if width != self._strip_width:
            self._strips.clear()
            self._strip_width = width
            self.refresh()
            return
        for y in range(max(len(old), len(lines))):
            if y < len(old) and y < len(lines) and old[y] == lines[y] and old[y].style == lines[y].style:
                continue
            before = self._strips.pop(y, None)
            self.line_refreshes += 1
            if before is None or y >= self.size.height:
                self.refresh(Region(0, y, width, 1))
                continue
            for start, end in changed_runs(cells(before), cells(self.render_line(y))):
                self.refresh(Region(start, y, end - start, 1))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._strip_width:
            self._strips.clear()
            self._strip_width = width
            self._base = None
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
