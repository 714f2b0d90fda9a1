"""The confirmation dialog behind ``k``: SIGTERM, SIGKILL or cancel, with the process named in full."""

from __future__ import annotations

import signal
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from gpuwatch.model.snapshot import ProcessSample
from gpuwatch.tui.format import pct, size


class KillDialog(ModalScreen[int | None]):
    """Dismisses with the signal number to send, or ``None`` to send nothing."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n,q", "cancel", "cancel"),
        Binding("t", "choose('SIGTERM')", "SIGTERM"),
        Binding("K", "choose('SIGKILL')", "SIGKILL"),
    ]
    DEFAULT_CSS = """
    KillDialog { align: center middle; }
    KillDialog > Vertical { width: 72; height: auto; border: thick $error; background: $panel; padding: 1 2; }
    KillDialog Label { width: 100%; }
    KillDialog Horizontal { height: auto; margin-top: 1; align-horizontal: center; }
    KillDialog Button { margin: 0 1; }
    """

    def __init__(self, proc: ProcessSample) -> None:
        super().__init__()
        self.proc = proc

    def compose(self) -> ComposeResult:
        p = self.proc
        with Vertical():
            yield Label(f"[b]Signal pid {p.pid}[/b] ({p.user or 'unknown user'}) on GPU {p.gpu_index}?")
            yield Label(f"GPU memory {size(p.gpu_memory_bytes)}, CPU {pct(p.cpu_percent).strip()}, "
                        f"RSS {size(p.rss_bytes)}")
            yield Label((p.cmdline or p.name or "?")[:200], markup=False)
            yield Label("[dim]SIGTERM asks it to exit cleanly; SIGKILL ends it at once (GPU memory is freed).[/dim]")
            with Horizontal():
                yield Button("SIGTERM (t)", id="sigterm", variant="warning")
                yield Button("SIGKILL (K)", id="sigkill", variant="error")
                yield Button("Cancel (Esc)", id="cancel", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        choice = {"sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}.get(event.button.id or "")
        self.dismiss(int(choice) if choice is not None else None)

    def action_choose(self, name: str) -> None:
        self.dismiss(int(getattr(signal, name)))

    def action_cancel(self) -> None:
        self.dismiss(None)
