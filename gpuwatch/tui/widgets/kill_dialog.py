"""The confirmation dialog behind ``k`` (SIGTERM or SIGKILL) and nvitop's ``T``/``K``/``I`` (one signal,
then yes or no), with the process named in full."""

from __future__ import annotations

import signal
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.tui.format import memory, pct

#: What each signal does to a GPU process, in the words the dialog uses.
MEANING = {signal.SIGTERM: "asks it to exit cleanly", signal.SIGKILL: "ends it at once (GPU memory is freed)",
           signal.SIGINT: "is Ctrl-C: Python raises KeyboardInterrupt"}
#: The key that picks each signal in the two-signal dialog (htop's and nvitop's letters).
KEYS = {signal.SIGTERM: "t", signal.SIGKILL: "K", signal.SIGINT: "I"}


class KillDialog(ModalScreen[int | None]):
    """Dismisses with the signal number to send, or ``None`` to send nothing. With one signal offered, ``y``
    confirms it (Enter presses the focused button, Cancel at first); with several, each signal's key picks it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n,q", "cancel", "cancel"),
        Binding("t", "choose('SIGTERM')", "SIGTERM", show=False),
        Binding("K", "choose('SIGKILL')", "SIGKILL", show=False),
        Binding("I", "choose('SIGINT')", "SIGINT", show=False),
        Binding("y", "confirm", "yes", show=False),
    ]
    DEFAULT_CSS = """
    KillDialog { align: center middle; }
    KillDialog > Vertical { width: 72; max-width: 100%; height: auto; border: thick $error; background: $panel;
                            padding: 1 2; }
    KillDialog Label { width: 100%; }
    KillDialog Horizontal { height: auto; margin-top: 1; align-horizontal: center; }
    KillDialog Button { margin: 0 1; }
    """

    def __init__(self, proc: ProcessSample, offer: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGKILL)
                 ) -> None:
        super().__init__()
        self.proc = proc
        self.offer = offer

    def compose(self) -> ComposeResult:
        p = self.proc
        single = len(self.offer) == 1
        verb = f"Send {self.offer[0].name} to" if single else "Signal"
        with Vertical():
            yield Label(f"[b]{verb} pid {p.pid}[/b] ({escape(p.user or 'unknown user')}) on GPU {p.gpu_index}?")
            yield Label(f"GPU memory {memory(p.gpu_memory_bytes)}, CPU {pct(p.cpu_percent).strip()}, "
                        f"RSS {memory(p.rss_bytes)}")
            yield Label((p.cmdline or p.name or "?")[:200], markup=False)
            yield Label("[dim]" + "; ".join(f"{s.name} {MEANING[s]}" for s in self.offer) + ".[/dim]")
            with Horizontal():
                for sig in self.offer:
                    key = "y" if single else KEYS[sig]
                    yield Button(f"{sig.name} ({key})", id=sig.name.lower(),
                                 variant="error" if sig == signal.SIGKILL else "warning")
                yield Button("Cancel (Esc)", id="cancel", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        chosen = [s for s in self.offer if s.name.lower() == event.button.id]
        self.dismiss(int(chosen[0]) if chosen else None)

    def action_choose(self, name: str) -> None:
        sig = signal.Signals[name]
        if sig in self.offer and len(self.offer) > 1:
            self.dismiss(int(sig))

    def action_confirm(self) -> None:
        if len(self.offer) == 1:
            self.dismiss(int(self.offer[0]))

    def action_cancel(self) -> None:
        self.dismiss(None)
