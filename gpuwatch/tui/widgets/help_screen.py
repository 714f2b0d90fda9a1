"""The ``?`` screen: the keys, and what the numbers mean (the part GPU-Util does not tell)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]Keys[/b]  (htop / nvitop style; the mouse works too: click a column header to sort by it)
  q            quit                         ?        this help
  /            filter processes (Enter keeps it, Esc clears it)
  s            sort by the next column      r        reverse the sort
  t            tree view by parent          k        signal the selected process (SIGTERM/SIGKILL)
  p            pause / resume               1-9      show GPU 0-8 (its processes only)   0  all GPUs
  ↑ ↓ PgUp PgDn  move in the table          Tab      next pane        ctrl+p  commands, themes

[b]What the numbers mean[/b]
  GPU-Util     share of time [i]any[/i] kernel ran. 100 % can mean one tiny kernel on one SM.
  SM active    share of SMs busy (GPM on Hopper, else DCGM); the tag says which backend measured it.
  SM occup.    resident warps against the maximum: low means small kernels or small batches.
  tensor       tensor-core activity: near 0 with FP32 math means FP16/BF16 would be faster.
  DRAM bw      memory bandwidth used against the peak (not the same as memory [i]occupied[/i]).
  THR%         CPU of the busiest thread: ~100 % is one core saturated, e.g. Python holding the GIL.
  S            process state; "2D" means two threads waiting on disk or network storage.
  clocks       clock-event reasons: power_cap (warning) and thermal/slowdown (error) cut performance.

[b]Modes[/b]
  live         sampling this machine; processes may be signalled where you own them (or as root).
  recording    replaying a file (RECORDING banner): pids belong to the recorded machine, so no signals.
  remote       watching daemons (--connect): signal processes on their own host instead.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "close", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100; max-width: 100%; height: auto; max-height: 100%;
                                  border: round $primary; background: $panel; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(HELP)

    def action_close(self) -> None:
        self.dismiss(None)
