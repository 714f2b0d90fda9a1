"""Enter on a process: everything the snapshot knows about it, the whole command line included.

Every field of the sample is listed (new ones appear without a change here), formatted by its unit:
bytes, bytes per second, percent, a start time.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuwatch.model.snapshot import ProcessSample
from gpuwatch.tui.format import DASH, clock, pct, rate, size


def _value(name: str, value: Any) -> str:
    if value is None or value == "":
        return DASH
    if name.endswith("_bytes_s"):
        return rate(value)
    if name.endswith("_bytes"):
        return size(value)
    if name.endswith(("_percent", "_util")):
        return pct(value).strip()
    if name == "create_time":
        return clock(value)
    return str(value)


def details(p: ProcessSample) -> Table:
    """One row per field: ``label  value``; the command line last, in full."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("shown as", p.command_label)
    for f in dataclasses.fields(p):
        if f.name != "cmdline":
            table.add_row(f.name.replace("_", " "), _value(f.name, getattr(p, f.name)))
    table.add_row("command line", Text(p.cmdline or DASH))
    return table


class ProcessScreen(ModalScreen[None]):
    """The selected process in full; Esc, Enter or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "close", "close")]
    DEFAULT_CSS = """
    ProcessScreen { align: center middle; }
    ProcessScreen > VerticalScroll { width: 100; max-width: 100%; height: auto; max-height: 100%;
                                     border: round $primary; background: $panel; padding: 0 1; }
    """

    def __init__(self, proc: ProcessSample) -> None:
        super().__init__()
        self.proc = proc

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = f"pid {self.proc.pid} on GPU {self.proc.gpu_index}"
            yield Static(details(self.proc))

    def action_close(self) -> None:
        self.dismiss(None)
