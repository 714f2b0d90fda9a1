"""What the keys and the mouse do on the dashboard: :class:`DashboardScreen`, the dashboard's screen.

The view state (sort, filter, tree, which GPU) is reactive state of the screen's view
(:class:`gpuwatch.tui.screen.DashboardView`): the process table is bound to it with ``data_bind`` and the
status line and panels redraw from watchers, so a key handler here only sets a value. F1 is htop's help; F10
(htop's quit) and Ctrl-C quit from any screen (the app binds them).
"""

from __future__ import annotations

import signal
from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.widgets import Input

from gpuwatch.model.durations import format_duration
from gpuwatch.tui import signals, timetravel
from gpuwatch.tui.screen import DashboardView
from gpuwatch.tui.status import kill_refusal
from gpuwatch.tui.widgets.diagnosis_pane import DiagnosisPane
from gpuwatch.tui.widgets.fleet_table import FleetTable
from gpuwatch.tui.widgets.help_screen import HelpScreen
from gpuwatch.tui.widgets.kill_dialog import KillDialog
from gpuwatch.tui.widgets.process_screen import ProcessScreen
from gpuwatch.tui.widgets.process_table import ProcessTable
from gpuwatch.tui.widgets.row_table import RowTable

KEYS: list[BindingType] = [
    Binding("q", "app.quit", "quit"),
    Binding("question_mark,h", "help", "help", key_display="?"),
    Binding("f1", "help", "help", show=False),
    Binding("slash", "filter", "filter", key_display="/"),
    Binding("s", "step_sort(1)", "sort"),
    Binding("full_stop", "step_sort(1)", "next sort column", show=False),
    Binding("comma", "step_sort(-1)", "previous sort column", show=False),
    Binding("r", "reverse_sort", "reverse", show=False),
    Binding("t", "tree", "tree"),
    Binding("enter", "details", "details", show=False),
    Binding("k", "kill", "kill"),
    Binding("T", "signal('SIGTERM')", "SIGTERM", show=False),
    Binding("K", "signal('SIGKILL')", "SIGKILL", show=False),
    Binding("I", "signal('SIGINT')", "SIGINT", show=False),
    Binding("p", "pause", "pause"),
    Binding("left_square_bracket", "travel(-1, 0)", "one tick back", show=False),
    Binding("right_square_bracket", "travel(1, 0)", "one tick forward", show=False),
    Binding("left_curly_bracket", "travel(0, -10)", "10 s back", show=False),
    Binding("right_curly_bracket", "travel(0, 10)", "10 s forward", show=False),
    Binding("less_than_sign", "travel(0, -60)", "1 min back", show=False),
    Binding("greater_than_sign", "travel(0, 60)", "1 min forward", show=False),
    Binding("l", "live", "back to live", show=False),
    Binding("escape", "clear_filter", "clear filter", show=False),
    *[Binding(str(n), f"pick_gpu({n})", f"GPU {n - 1}", show=False) for n in range(1, 10)],
    Binding("0", "pick_gpu(0)", "all GPUs", show=False),
]


class DashboardScreen(DashboardView):
    """The dashboard: the view's widgets and state, and what each key and click does to them."""

    BINDINGS: ClassVar[list[BindingType]] = KEYS

    # -- mouse -------------------------------------------------------------------------------------------
    @on(RowTable.HeaderClicked, "#procs")
    def _header_clicked(self, event: RowTable.HeaderClicked) -> None:
        self.sort = self.sort.by(event.column)

    @on(RowTable.CursorMoved, "#fleet")
    def _fleet_row(self, event: RowTable.CursorMoved) -> None:
        picked = self.query_one(FleetTable).selected()
        if picked is None:
            return
        source, gpu = picked
        if (source, gpu) != (self.selected_source, self.selected_gpu):
            self.selected_source = source
            state = self.sources.get(source)
            if state is not None and self.moment is not None:  # back in time: that source at the same moment
                self.go_to(self.moment)
            elif state is not None:
                self.query_one(DiagnosisPane).show(state.findings, state.diagnosis_note)
            if gpu is not None and gpu != self.selected_gpu:
                self.selected_gpu = gpu  # redraws through its watcher
            else:
                self._render_selected()

    # -- filter ------------------------------------------------------------------------------------------
    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one("#filter").display = False
        self.query_one(ProcessTable).focus()
        self._relayout()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True  # at once, not via a class: keys typed right after "/" must land in the box
        box.focus()
        self._relayout()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.query_one(ProcessTable).focus()
        self._relayout()

    # -- view --------------------------------------------------------------------------------------------
    def action_step_sort(self, delta: int) -> None:
        self.sort = self.sort.step(self.query_one(ProcessTable).column_keys, delta)

    def action_reverse_sort(self) -> None:
        self.sort = self.sort.flipped()

    def action_tree(self) -> None:
        self.tree_view = not self.tree_view

    def action_pause(self) -> None:
        self.paused = not self.paused

    def action_travel(self, ticks: int, seconds: float) -> None:
        """Pause (if live) and show the moment ``ticks`` samples or ``seconds`` away from the one shown."""
        state = self.sources.get(self.selected_source or "")
        history = state.history if state is not None else None
        if history is None or not len(history) or state is None or state.snapshot is None:
            self.notify("no history yet", severity="warning", timeout=3)
            return
        self.paused = True
        frozen = self.paused_at if self.paused_at is not None else state.snapshot.time
        shown = self.moment if self.moment is not None else frozen
        moment = timetravel.step(history, shown, ticks=ticks, seconds=seconds)
        oldest, newest = next(iter(history)).time, history.latest()
        if moment == shown == oldest and (ticks < 0 or seconds < 0) and newest is not None:
            kept = format_duration(round(newest.time - oldest))
            self.notify(f"this is the oldest sample kept ({kept} before the newest; --history keeps more)",
                        timeout=3)
        self.go_to(moment)

    def action_live(self) -> None:
        self.paused = False

    def action_pick_gpu(self, n: int) -> None:
        if n == 0:
            self.gpu_filter = None
            return
        state = self.sources.get(self.selected_source or "")
        snap = state.snapshot if state else None
        if snap is None or snap.gpu(n - 1) is None:
            have = ", ".join(str(g.index) for g in snap.gpus) if snap else "none yet"
            self.notify(f"there is no GPU {n - 1} here (GPUs: {have})", severity="warning", timeout=3)
            return
        self.gpu_filter = self.selected_gpu = n - 1
        if self.selected_source is not None:
            self.query_one(FleetTable).select(self.selected_source, n - 1)

    # -- screens -----------------------------------------------------------------------------------------
    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_details(self) -> None:
        proc = self.query_one(ProcessTable).selected()
        if proc is None:
            self.notify("no process selected", severity="warning", timeout=3)
            return
        self.app.push_screen(ProcessScreen(proc, self.query_one(ProcessTable).label(proc)))

    def action_kill(self) -> None:
        self._confirm_signal((signal.SIGTERM, signal.SIGKILL))

    def action_signal(self, name: str) -> None:
        self._confirm_signal((signal.Signals[name],))

    def _confirm_signal(self, offer: tuple[signal.Signals, ...]) -> None:
        """Refuse in one line, or ask which signal (or whether) to send, then check again and send it."""
        refusal = kill_refusal(self.feed.mode, self.feed.description)
        if refusal is None and self.moment is not None:
            refusal = "the table shows a past moment; press l for live and pick the process there"
        proc = self.query_one(ProcessTable).selected()
        if refusal is None and proc is None:
            refusal = "no process selected"
        if refusal is None and proc is not None:
            refusal = signals.why_not(proc)
        if refusal is not None or proc is None:
            self.notify(f"cannot signal: {refusal}", severity="error", timeout=5)
            return
        target = proc

        def done(sig: int | None) -> None:
            if sig is None:
                self.notify(f"pid {target.pid} left running", timeout=3)
                return
            sent, message = signals.send(target, sig)
            self.notify(message, severity="information" if sent else "error", timeout=5)

        self.app.push_screen(KillDialog(target, offer), done)
