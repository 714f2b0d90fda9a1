"""What the keys and the mouse do: sort, filter, tree, pause, GPU pick, help and the kill dialog.

A mixin of the app, kept apart so the app module stays about data flow and drawing.
"""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import App
from textual.reactive import reactive
from textual.widgets import Input

from gpuwatch.tui import signals
from gpuwatch.tui.feed import Feed
from gpuwatch.tui.status import kill_refusal
from gpuwatch.tui.widgets.diagnosis_pane import DiagnosisPane
from gpuwatch.tui.widgets.fleet_table import FleetTable
from gpuwatch.tui.widgets.help_screen import HelpScreen
from gpuwatch.tui.widgets.kill_dialog import KillDialog
from gpuwatch.tui.widgets.process_table import ProcessTable
from gpuwatch.tui.widgets.row_table import RowTable


class Controls(App[None]):
    """Key and mouse handlers; the app provides the state and the two render methods."""

    paused: reactive[bool] = reactive(False)
    feed: Feed
    sources: dict[str, Any]
    selected_source: str | None
    selected_gpu: int | None

    def _render_selected(self) -> None:
        raise NotImplementedError

    def _render_status(self) -> None:
        raise NotImplementedError

    @on(RowTable.HeaderClicked, "#procs")
    def _header_clicked(self, event: RowTable.HeaderClicked) -> None:
        self.query_one(ProcessTable).sort_by(event.column)
        self._render_status()

    @on(RowTable.CursorMoved, "#fleet")
    def _fleet_row(self, event: RowTable.CursorMoved) -> None:
        picked = self.query_one(FleetTable).selected()
        if picked is None:
            return
        source, gpu = picked
        if (source, gpu) != (self.selected_source, self.selected_gpu):
            self.selected_source = source
            self.selected_gpu = gpu if gpu is not None else self.selected_gpu
            state = self.sources.get(source)
            if state is not None:
                self.query_one(DiagnosisPane).show(state.findings, state.diagnosis_note)
            self._render_selected()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        table = self.query_one(ProcessTable)
        table.filter_text = event.value.strip()
        table.refilter()
        self._render_status()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one("#filter").display = False
        self.query_one(ProcessTable).focus()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True  # at once, not via a class: keys typed right after "/" must land in the box
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.query_one(ProcessTable).focus()

    def action_cycle_sort(self) -> None:
        self.query_one(ProcessTable).cycle_sort()
        self._render_status()

    def action_reverse_sort(self) -> None:
        table = self.query_one(ProcessTable)
        table.sort_by(table.sort_key)
        self._render_status()

    def action_tree(self) -> None:
        table = self.query_one(ProcessTable)
        table.tree_view = not table.tree_view
        table.refilter()
        self._render_status()

    def action_pause(self) -> None:
        self.paused = not self.paused

    def watch_paused(self, paused: bool) -> None:
        self.feed.pause(paused)
        if not paused:
            self._render_selected()
        self._render_status()

    def action_pick_gpu(self, n: int) -> None:
        table = self.query_one(ProcessTable)
        if n == 0:
            table.gpu_filter = None
        else:
            state = self.sources.get(self.selected_source or "")
            snap = state.snapshot if state else None
            if snap is None or snap.gpu(n - 1) is None:
                have = ", ".join(str(g.index) for g in snap.gpus) if snap else "none yet"
                self.notify(f"there is no GPU {n - 1} here (GPUs: {have})", severity="warning", timeout=3)
                return
            self.selected_gpu = table.gpu_filter = n - 1
            if self.selected_source is not None:
                self.query_one(FleetTable).select(self.selected_source, n - 1)
        table.refilter()
        self._render_selected()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_kill(self) -> None:
        refusal = kill_refusal(self.feed.mode, self.feed.description)
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

        self.push_screen(KillDialog(target), done)
