"""A keyed table drawn one line per row, repainting only the rows whose cells changed.

Textual's DataTable re-renders every cell of every visible row whenever one cell changes (its render
caches are keyed on a table-wide update counter) and renders each cell through Rich's full layout
pipeline. The dashboard's tables change a few numbers per row each second, so this table composes each
row as one Text, caches it by its cells, and repaints single lines. It keeps what the dashboard uses of
DataTable: a fixed header (click to sort), a row cursor (keys and mouse), the mouse wheel, and messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message

from gpuwatch.tui.widgets.lines import LinesWidget

Cell = str | Text


@dataclass(frozen=True)
class Col:
    key: str
    label: str
    width: int
    right: bool = False


def fit(cell: Cell, width: int, right: bool) -> Text:
    """``cell`` cut or padded to exactly ``width`` cells, aligned as the column says."""
    text = cell.copy() if isinstance(cell, Text) else Text(cell)
    if text.cell_len > width:
        text.truncate(width, overflow="ellipsis")
    pad = width - text.cell_len
    if pad > 0:
        if right:
            text = Text(" " * pad) + text
        else:
            text.append(" " * pad)
    return text


class RowTable(LinesWidget, can_focus=True):
    """Rows keyed by string; ``set_rows`` replaces the contents, unchanged rows cost nothing."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "up", show=False),
        Binding("down", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "move(-1000000)", "first", show=False),
        Binding("end", "move(1000000)", "last", show=False),
    ]
    DEFAULT_CSS = "RowTable { height: 1fr; }"

    @dataclass
    class CursorMoved(Message):
        table: RowTable
        key: str | None

        @property
        def control(self) -> RowTable:
            return self.table

    @dataclass
    class HeaderClicked(Message):
        table: RowTable
        column: str

        @property
        def control(self) -> RowTable:
            return self.table

    @dataclass
    class RowCountChanged(Message):
        """The number of rows changed: the layout may give the table (or its neighbours) other heights."""

        table: RowTable
        count: int

        @property
        def control(self) -> RowTable:
            return self.table

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cols: tuple[Col, ...] = ()
        self.labels: dict[str, str] = {}
        self.keys: list[str] = []
        self.cells: dict[str, tuple[Cell, ...]] = {}
        self.cursor = 0
        self.top = 0
        #: Shown under the header while there are no rows (e.g. "no alerts").
        self.empty_text: Text | str = ""
        self._row_text: dict[str, tuple[tuple[Cell, ...], tuple[bool, bool], Text]] = {}
        #: The header line and what it was built from (columns, labels, colour): built again only when they change.
        self._header: tuple[object, Text] | None = None

    # -- contents ----------------------------------------------------------------------------------------
    def set_columns(self, cols: Sequence[Col]) -> None:
        self.cols = tuple(cols)
        self._row_text.clear()
        self.redraw()

    def set_label(self, key: str, label: str) -> None:
        self.labels[key] = label
        self.redraw()

    def set_rows(self, keys: list[str], cells: dict[str, tuple[Cell, ...]]) -> None:
        """Show ``keys`` in this order; the cursor stays on its row when that row is still there."""
        current = self.cursor_key()
        grew_or_shrank = len(keys) != len(self.keys)
        self.keys, self.cells = keys, cells
        for gone in [k for k in self._row_text if k not in cells]:
            del self._row_text[gone]
        if current is not None and current in cells:
            self.cursor = keys.index(current)
        self.cursor = max(0, min(self.cursor, len(keys) - 1))
        self.redraw()
        if self.cursor_key() != current:
            self.post_message(self.CursorMoved(self, self.cursor_key()))
        if grew_or_shrank:
            self.post_message(self.RowCountChanged(self, len(keys)))

    @property
    def row_count(self) -> int:
        return len(self.keys)

    def cursor_key(self) -> str | None:
        return self.keys[self.cursor] if 0 <= self.cursor < len(self.keys) else None

    def move_to(self, key: str) -> None:
        if key in self.cells:
            self._set_cursor(self.keys.index(key))

    # -- drawing -----------------------------------------------------------------------------------------
    def _visible_rows(self) -> int:
        return max(1, self.size.height - 1)

    def _row(self, key: str, selected: bool) -> Text:
        cells = self.cells[key]
        state = (selected, selected and self.has_focus)
        cached = self._row_text.get(key)
        if cached is not None and cached[0] == cells and cached[1] == state:
            return cached[2]
        line = Text(no_wrap=True)
        for col, cell in zip(self.cols, cells, strict=False):
            line.append(" ")
            line.append_text(fit(cell, col.width, col.right))
            line.append(" ")
        if selected:
            theme = self.app.current_theme
            line.stylize(f"bold {theme.foreground or 'white'} on {theme.primary}" if self.has_focus
                         else f"on {theme.panel or theme.surface or 'grey23'}")
        self._row_text[key] = (cells, state, line)
        return line

    def redraw(self) -> None:
        rows = self._visible_rows()
        if self.cursor < self.top:
            self.top = self.cursor
        elif self.cursor >= self.top + rows:
            self.top = self.cursor - rows + 1
        self.top = max(0, min(self.top, max(0, len(self.keys) - rows)))
        lines = [self._header_line()]
        for i in range(self.top, min(len(self.keys), self.top + rows)):
            lines.append(self._row(self.keys[i], i == self.cursor))
        if not self.keys and self.empty_text:
            lines.append(Text(" ") + (self.empty_text if isinstance(self.empty_text, Text) else Text(self.empty_text)))
        self.set_lines(lines)

    def _header_line(self) -> Text:
        panel = self.app.current_theme.panel or "grey23"
        key = (self.cols, tuple(self.labels.get(col.key, col.label) for col in self.cols), panel)
        if self._header is not None and self._header[0] == key:
            return self._header[1]
        header = Text(no_wrap=True, style="bold")
        for col, label in zip(self.cols, key[1], strict=True):
            header.append(" ")
            header.append_text(fit(label, col.width, col.right))
            header.append(" ")
        header.stylize(f"on {panel}")
        self._header = (key, header)
        return header

    def on_mount(self) -> None:
        self.watch(self.app, "theme", lambda _: self._restyle(), init=False)

    def _restyle(self) -> None:
        self._row_text.clear()
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def on_focus(self) -> None:
        self.call_after_refresh(self.redraw)  # the cursor row's colour says whether keys go here

    def on_blur(self) -> None:
        self.call_after_refresh(self.redraw)

    # -- input -------------------------------------------------------------------------------------------
    def _set_cursor(self, index: int) -> None:
        index = max(0, min(index, len(self.keys) - 1))
        if index != self.cursor:
            self.cursor = index
            self.redraw()
            self.post_message(self.CursorMoved(self, self.cursor_key()))

    def action_move(self, delta: int) -> None:
        self._set_cursor(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._set_cursor(self.cursor + direction * self._visible_rows())

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            x = 0
            for col in self.cols:
                if x <= event.x < x + col.width + 2:
                    self.post_message(self.HeaderClicked(self, col.key))
                    return
                x += col.width + 2
            return
        self._set_cursor(self.top + event.y - 1)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._set_cursor(self.cursor + 3)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._set_cursor(self.cursor - 3)

    def row_values(self, key: str) -> tuple[Any, ...]:
        return self.cells[key]
