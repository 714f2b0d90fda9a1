"""A widget drawn as a list of lines, of which only the lines that changed are redrawn.

Textual redraws the whole region of a widget that calls ``refresh()``. Most of the dashboard changes a
few numbers per second, so these widgets compare the new lines with the old ones and refresh one-line
regions: the terminal receives only what changed (no flicker, little CPU).
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


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
        """Show ``lines``; refresh only the rows whose text or style changed."""
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
            if y >= len(old) or y >= len(lines) or old[y] != lines[y] or old[y].style != lines[y].style:
                self._strips.pop(y, None)
                self.refresh(Region(0, y, width, 1))
                self.line_refreshes += 1

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
