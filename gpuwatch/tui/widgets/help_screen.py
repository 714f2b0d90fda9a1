"""The ``?`` screen: the keys, and what the numbers mean (the part GPU-Util does not tell)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]Keys[/b] (htop / nvitop style; the mouse works too: click a header to sort by that column)
  q F10    quit (ctrl+c too)           ? h F1   this help
  /        filter processes            Esc      clear the filter (Enter keeps it)
  s .      sort by the next column     ,        sort by the previous column
  r        reverse the sort            t        tree view by parent
  Enter    the selected process in full (whole command line, every field)
  ← →      scroll a long command       p        pause / resume
  [ ]      one sample back / forward   { }      10 s back / forward
  < >      1 min back / forward        l        back to live (p too)
  [dim]Going back pauses; each pane then shows that moment, Diagnosis the window ending there.[/dim]
  k        SIGTERM or SIGKILL the selected process
  T K I    SIGTERM, SIGKILL or SIGINT to the selected process, after y
  1-9      GPU 0-8 and its processes   0        all GPUs
  ↑ ↓ PgUp PgDn  move in a table       Tab      next pane; ctrl+p commands and themes
  [dim]Unlike nvitop, / filters (htop's way) and r reverses; nvitop's e (environment) is not here.[/dim]

[b]What the numbers mean[/b]
  GPU-Util   share of time [i]any[/i] kernel ran: 100 % can be one tiny kernel on one SM
  SM active  share of SMs busy (GPM on Hopper, else DCGM; the tag names the backend)
  SM occup.  resident warps against the maximum: low means small kernels or batches
  tensor     tensor-core activity: near 0 with FP32 means FP16/BF16 would be faster
  DRAM bw    memory bandwidth used against the peak (not memory [i]occupied[/i])
  THR%       CPU of the busiest thread: ~100 % is one core, e.g. Python holding the GIL
  S          process state; "2D" means two threads waiting on disk or network storage
  clocks     clock-event reasons: power_cap in warning colours, thermal/slowdown in red

[b]Modes[/b]
  live       this machine; you may signal processes you own (root: any)
  recording  a file (RECORDING banner): its pids are another machine's, so no signals
  remote     daemons (--connect): signal processes on their own host instead
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "close", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 94; max-width: 100%; height: auto; max-height: 100%;
                                  border: round $primary; background: $panel; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(HELP)

    def action_close(self) -> None:
        self.dismiss(None)
