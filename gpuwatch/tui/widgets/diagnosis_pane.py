"""The diagnosis pane: the doctor's findings, worst first, each with its evidence and the fix.

This is the pane that answers the incident's question ("GPU-Util is 12 %: why?") in words, with the
numbers that back the answer, so the reader can check it instead of trusting it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text
from textual.containers import VerticalScroll
from textual.scrollbar import ScrollBarRender
from textual.widget import Widget

from gpuwatch.doctor.groups import group_findings
from gpuwatch.model.finding import Finding
from gpuwatch.tui.widgets.lines import LinesWidget


def render_findings(findings: Sequence[Finding] | None, note: str, styles: dict[str, str]) -> Text:
    """The pane's text. ``note`` with findings: the doctor's window is still filling ("watching: 4 of
    30 s"), said first; "nothing to report" only once a whole window was seen."""
    if findings is None:
        return Text(note or "waiting for the first diagnosis…", style="dim")
    if not findings:
        if note:
            return Text(f"{note}: no finding yet", style="dim")
        return Text("nothing to report: no known bottleneck in the last minutes", style=styles.get("ok", ""))
    out = Text()
    if note:
        out.append(f"{note}: findings so far\n", style="dim")
    for i, group in enumerate(group_findings(findings)):
        f = group.finding
        if i:
            out.append("\n")
        colour = {"critical": styles.get("error", "red"), "warning": styles.get("warning", "yellow")}.get(
            f.severity, styles.get("info", "blue"))
        out.append(f" {f.severity.upper():8} ", style=f"bold reverse {colour}")
        many = len(group.gpus) > 1  # the same on several GPUs: said once, led by where ("GPUs 0, 2, 3: ...")
        out.append(" " + (f"{group.where()[0]}: " if many else "") + (f.title or f.code), style="bold")
        where = [*(group.where()[1:] if many else group.where()),
                 *(["since " + time.strftime("%H:%M:%S", time.localtime(f.since))] if f.since is not None else [])]
        if where:
            out.append("  (" + ", ".join(where) + ")", style="dim")
        for line in f.evidence:
            out.append("\n    • " + line)
        if f.fix:
            out.append("\n    fix: ", style=f"bold {styles.get('ok', 'green')}")
            out.append(f.fix)
    return out


class FindingsText(LinesWidget):
    """The findings wrapped to the pane's width, one line each: when a number in the evidence changes, only
    its cells are rewritten (a Static repaints the whole pane, ~6 kB, at every diagnosis)."""

    DEFAULT_CSS = "FindingsText { height: 1; }"  # then one row per wrapped line (set by _wrap)

    def __init__(self, text: Text, *, classes: str = "") -> None:
        super().__init__()
        self.set_classes(classes)
        self.text = text
        self._height = -1

    def show(self, text: Text) -> None:
        self.text = text
        self._wrap()

    def _wrap(self) -> None:
        width = self.size.width or (self.parent.size.width if isinstance(self.parent, Widget) else 0)
        lines = list(self.text.wrap(self.app.console, width) if width else self.text.split("\n"))
        # A new height lays the pane out again (twice: the new size refreshes the layout once more), so the
        # height changes only where it must: to show every line, or to stop scrolling past the last one.
        # Findings that gain or lose a line within the rows the pane shows lay nothing out.
        viewport = self.parent.scrollable_content_region.height if isinstance(self.parent, Widget) else 0
        height = min(max(self._height, len(lines)), max(len(lines), viewport))
        if height != self._height:
            self._height = height
            self.styles.height = height
        self.set_lines(lines)

    def on_mount(self) -> None:  # LinesWidget's own on_mount runs too (Textual calls each class's handler)
        self._wrap()

    def on_resize(self) -> None:
        self._wrap()


class SolidScrollBar(ScrollBarRender):
    """A thumb of whole cells drawn by colour alone: Textual's eighth-cell ends (▂, ▆) beside the findings
    read as a piece of a chart, and a terminal without colour (or a screen capture) shows nothing else."""

    VERTICAL_BARS = [" "] * 8


class DiagnosisPane(VerticalScroll):
    """Scrollable findings; redraws only the cells that change."""

    DEFAULT_CSS = ("DiagnosisPane { height: 1fr; scrollbar-size-vertical: 1; } "
                   "DiagnosisPane > FindingsText { width: 100%; }")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(FindingsText(Text("waiting for the first diagnosis…"), classes="body"), id=id)
        self.border_title = "Diagnosis"
        self._shown: Text | None = None
        #: Lines the shown findings take, by pane width (a layout asks for two widths, up to four times).
        self._lines_at: dict[int, int] = {}
        # this pane's scrollbar only (Textual's documented way; mypy refuses assigning its ClassVar on an instance)
        setattr(self.vertical_scrollbar, "renderer", SolidScrollBar)  # noqa: B010

    def on_resize(self) -> None:  # taller or shorter, the findings fill it again (see FindingsText._wrap)
        self.query_one(FindingsText).on_resize()

    def lines_at(self, width: int) -> int:
        """Lines the findings take in a pane ``width`` cells wide (border and padding taken off)."""
        if width not in self._lines_at:
            shown = self._shown if self._shown is not None else Text("waiting")
            self._lines_at[width] = len(shown.wrap(self.app.console, max(10, width - 4)))
        return self._lines_at[width]

    def show(self, findings: Sequence[Finding] | None, note: str = "", at: str = "") -> None:
        """``at``: the past moment whose window was judged (``at 14:03:12``), said in the title."""
        theme = self.app.current_theme
        styles = {"ok": theme.success or "green", "warning": theme.warning or "yellow",
                  "error": theme.error or "red", "info": theme.primary}
        text = render_findings(findings, note, styles)
        count = len(group_findings(findings or ()))
        name = f"Diagnosis {at}" if at else "Diagnosis"
        title = f"{name} · {count} finding{'s' if count != 1 else ''}" if findings else name
        if title != self.border_title:  # setting a title repaints the whole pane, even to the same words
            self.border_title = title
        if text != self._shown:
            self._shown = text
            self._lines_at.clear()
            self.query_one(FindingsText).show(text)
