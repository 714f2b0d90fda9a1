"""The dashboard's screen: its widgets, how the rows are shared among them, and how they are drawn from
what the app heard from its sources.

The app (:mod:`gpuwatch.tui.app`) owns the feed and the per-source state; this screen owns the widgets and
the view state (sort, filter, tree, which GPU, the moment shown while paused: :mod:`gpuwatch.tui.timetravel`),
and the keys that change it live in its subclass
(:class:`gpuwatch.tui.actions.DashboardScreen`). A new pane is one widget in :meth:`DashboardView.compose`,
drawn in :meth:`DashboardView._render_selected` from the selected source's state; where it needs rows of
its own, one more share in :func:`gpuwatch.tui.layout.plan`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from gpuwatch.model.alert import Alert
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.model.visible import visible, visible_fields
from gpuwatch.sampler.history import History
from gpuwatch.tui import timetravel
from gpuwatch.tui.feed import Feed
from gpuwatch.tui.layout import Plan, plan, settle
from gpuwatch.tui.status import banner_text, status_line
from gpuwatch.tui.widgets.alerts_pane import AlertsPane
from gpuwatch.tui.widgets.diagnosis_pane import DiagnosisPane
from gpuwatch.tui.widgets.fleet_table import FleetTable
from gpuwatch.tui.widgets.gpu_panel import GpuPanel
from gpuwatch.tui.widgets.history_plot import HistoryPlot
from gpuwatch.tui.widgets.lines import TextLine
from gpuwatch.tui.widgets.process_table import ProcessTable, Sort
from gpuwatch.tui.widgets.row_table import RowTable

#: Rows of the GPU panel row (the -tall screen adds the host and "more" lines), and the fleet table's cap.
TOP, TALL_TOP = 7, 9
FLEET_MAX, FLEET_MAX_SHORT = 10, 5
#: Below NARROW columns the history plot is hidden; below WIDE the GPU panel keeps a fixed 80 columns.
NARROW, WIDE = 120, 160


@dataclass
class SourceState:
    """What the dashboard last heard from one source (this machine, or one daemon)."""

    snapshot: Snapshot | None = None
    history: History | None = None
    alerts: tuple[Alert, ...] | None = None
    findings: list[Finding] | None = None
    diagnosis_note: str = ""
    status: str = "waiting for the first sample"
    problem: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class DashboardView(Screen[None]):
    """The widgets and the view state; ``sources`` is the app's, read here, never written."""

    paused: reactive[bool] = reactive(False)
    sort: reactive[Sort] = reactive(Sort, init=False)
    filter_text: reactive[str] = reactive("", init=False)
    tree_view: reactive[bool] = reactive(False, init=False)
    #: Only this GPU's processes in the table (``None``: all); keys 1-9 and 0.
    gpu_filter: reactive[int | None] = reactive(None, init=False)
    #: The GPU the panel and the plot show.
    selected_gpu: reactive[int | None] = reactive(None, init=False)

    def __init__(self, feed: Feed, sources: dict[str, SourceState]) -> None:
        super().__init__()
        self.feed = feed
        self.sources = sources
        self.selected_source: str | None = None
        self.rendered = 0
        self._banner = ""
        self._banner_description = ""
        self.layout_plan: Plan | None = None
        #: ``time.monotonic()`` since when the findings have needed fewer rows than their pane has (None: not).
        self._shrinking_since: float | None = None
        #: The moment a paused dashboard shows (a snapshot's time; None: live, or paused at the newest).
        self.moment: float | None = None
        #: The newest snapshot's time when ``p`` paused: what stays on screen (and where going back starts from)
        #: though a tick already under way lands after it.
        self.paused_at: float | None = None

    # -- widgets -----------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TextLine(id="status")
        yield Static(id="banner")
        yield FleetTable(id="fleet")
        with Horizontal(id="top"):
            yield GpuPanel(id="gpu")
            yield HistoryPlot(id="plot")
        yield Input(placeholder="filter: pid, user or command (Enter keeps, Esc clears)", id="filter")
        yield ProcessTable(id="procs").data_bind(DashboardView.sort, DashboardView.filter_text,
                                                 DashboardView.tree_view, DashboardView.gpu_filter)
        with Horizontal(id="bottom"):
            yield AlertsPane(id="alerts")
            yield DiagnosisPane(id="diagnosis")
        yield Footer()

    def on_mount(self) -> None:
        if self.feed.mode == "recording":
            self._show_banner(self.feed.description)
        fleet = self.query_one(FleetTable)
        fleet.set_class(self.feed.mode == "remote", "-shown")
        fleet.set_source_order(getattr(self.feed, "urls", []))
        self._fit(self.app.size.width, self.app.size.height)
        waiting = Text(f" gpuwatch · {self.feed.description} · waiting for the first sample")
        self.query_one("#status", TextLine).show(waiting)
        self.query_one(ProcessTable).focus()
        for source, state in list(self.sources.items()):  # what the app heard before the widgets were up
            self.status_changed(source, state)
            self.snapshot_arrived(source, state)
            self.diagnosis_arrived(source, state)

    # -- layout ------------------------------------------------------------------------------------------
    def on_resize(self, event: Any) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        self.set_class(width < NARROW, "-narrow")
        self.set_class(NARROW <= width < WIDE, "-medium")
        self.set_class(height < 36, "-short")
        self.set_class(height >= 45, "-tall")
        self.query_one(ProcessTable).fit(width)
        if self._banner_description:
            self._show_banner(self._banner_description)
        self._render_selected()
        self._relayout()

    def _relayout(self, findings_changed: bool = False) -> None:
        """Share the rows under the GPU panel by content (see :mod:`gpuwatch.tui.layout`); after new
        findings, rows they no longer need are given back only once that has lasted (``settle``)."""
        width, height = self.app.size
        fleet = self.query_one(FleetTable)
        top = TALL_TOP if height >= 45 else TOP
        fixed = 1 + 1 + top  # status line, footer, GPU panel
        fixed += self.query_one("#banner").has_class("-shown") + self.query_one("#filter").display
        if fleet.has_class("-shown"):
            fixed += min(FLEET_MAX_SHORT if height < 36 else FLEET_MAX, fleet.row_count + 1)
        diagnosis = self.query_one(DiagnosisPane)
        new = plan(height - fixed, width, self.query_one(ProcessTable).row_count,
                   self.query_one(AlertsPane).row_count, diagnosis.lines_at, plot_shown=width >= NARROW)
        if findings_changed:
            new, self._shrinking_since = settle(self.layout_plan, new, self._shrinking_since, time.monotonic())
        else:
            self._shrinking_since = None
        if new == self.layout_plan:
            return
        self.layout_plan = new
        self.query_one("#top").styles.height = top + new.top_extra
        self.query_one(ProcessTable).styles.height = new.procs
        bottom = self.query_one("#bottom")
        bottom.set_class(new.stacked, "-stacked")
        bottom.styles.height = new.bottom
        self.query_one(AlertsPane).styles.height = new.alerts
        diagnosis.styles.height = new.diagnosis

    @on(RowTable.RowCountChanged, "#procs, #alerts, #fleet")
    def _rows_changed(self) -> None:
        self._relayout()

    # -- what the app heard ------------------------------------------------------------------------------
    def snapshot_arrived(self, source: str, state: SourceState) -> None:
        snap = state.snapshot
        if snap is None:
            return
        if self.selected_source is None:
            self.selected_source = source
        if self.selected_gpu is None and snap is not None and snap.gpus:
            self.selected_gpu = snap.gpus[0].index
        self._update_fleet(source, state)
        if source != self.selected_source:
            return
        if self.paused:  # the panes stay; the status line's "(−N s)" says how far behind the newest they are
            self._render_status()
        else:
            self._render_selected()

    def diagnosis_arrived(self, source: str, state: SourceState) -> None:
        if source == self.selected_source and self.moment is None:  # back in time: that moment's verdict stays
            self.query_one(DiagnosisPane).show(state.findings, state.diagnosis_note)
            self._relayout(findings_changed=True)

    def status_changed(self, source: str, state: SourceState) -> None:
        if self.selected_source is None:
            self.selected_source = source
        self._update_fleet(source, state)
        self._render_status()

    # -- drawing -----------------------------------------------------------------------------------------
    def _update_fleet(self, source: str, state: SourceState) -> None:
        fleet = self.query_one(FleetTable)
        snap = state.snapshot
        if self.feed.mode != "remote" and snap is not None and len(snap.gpus) > 1 and not fleet.has_class("-shown"):
            fleet.add_class("-shown")
            self._relayout()
        if fleet.has_class("-shown"):
            address = source.split("://", 1)[-1]
            host = snap.host.hostname if snap is not None else address
            twins = [s for k, s in self.sources.items() if k != source and s.snapshot is not None
                     and s.snapshot.host.hostname == host]
            if twins and host != address:  # two daemons report the same hostname: say which is which
                host = f"{host}@{address}"
            status = "ok" if not state.problem else state.status.removeprefix(f"{source}: ")
            fleet.show(source, host, snap, state.alerts, status)

    def go_to(self, moment: float) -> None:
        """Show ``moment`` (paused): every pane from the history as it stood then, and the doctor's verdict on
        the window that ends there."""
        self.moment = moment
        state = self.sources.get(self.selected_source or "")
        if state is None or state.history is None:
            return
        findings, note = timetravel.diagnose_at(state.history, moment, self.feed.diagnosis_window_s)
        shown = timetravel.snapshot_at(state.history, moment)
        at = timetravel.marker(shown.time, None).removeprefix("PAUSED ") if shown else ""
        self.query_one(DiagnosisPane).show(visible_fields(findings), visible(note), at=at)
        self._relayout(findings_changed=True)
        self._render_selected()

    @property
    def shown_moment(self) -> float | None:
        """The moment on screen: the one gone back to, or the one ``p`` paused at; None: the newest."""
        return self.moment if self.moment is not None else self.paused_at if self.paused else None

    def _shown(self, state: SourceState) -> tuple[Snapshot | None, History | None, tuple[Alert, ...] | None]:
        """The snapshot, history and alerts to draw: the newest, or those of the moment on screen."""
        shown = self.shown_moment
        if shown is None or state.history is None or not len(state.history):
            return state.snapshot, state.history, state.alerts
        return (timetravel.snapshot_at(state.history, shown),
                timetravel.history_until(state.history, shown), timetravel.alerts_at(state.alerts, shown))

    def _render_selected(self) -> None:
        state = self.sources.get(self.selected_source or "")
        if state is None or state.snapshot is None:
            return
        snap, history, alerts = self._shown(state)
        if snap is None:
            return
        self.rendered += 1
        with self.app.batch_update():  # one frame for all the widgets a tick touches
            self._render_status()
            if self.feed.mode == "remote" and snap.is_recording:
                self._show_banner(f"recording on {snap.host.hostname}: {snap.origin.split(':', 1)[-1]}")
            gpu = snap.gpu(self.selected_gpu) if self.selected_gpu is not None else None
            self.query_one(GpuPanel).show(gpu, snap.host, snap.time)
            if history is not None and self.selected_gpu is not None:
                end = "now" if self.moment is None else time.strftime("%H:%M:%S", time.gmtime(snap.time))
                self.query_one(HistoryPlot).plot(history, self.selected_gpu, end)
            self.query_one(ProcessTable).show(snap.processes, snap.command_labels())
            self.query_one(AlertsPane).show(alerts, snap.time, self.feed.alerts_note)

    def _show_banner(self, description: str) -> None:
        self._banner_description = description
        text = banner_text(description, self.app.size.width - 2)  # the banner's padding: one cell a side
        if text != self._banner:
            self._banner = text
            banner = self.query_one("#banner", Static)
            banner.update(text)
            banner.add_class("-shown")
            self._relayout()

    def _render_status(self) -> None:
        state = self.sources.get(self.selected_source or "")
        if state is None:
            return
        # A recording's name is on the banner already; the status line keeps its room for numbers.
        description = "" if self.feed.mode == "recording" else self.feed.description
        snap, shown = state.snapshot, self.shown_moment
        if shown is not None and state.history is not None and len(state.history):
            snap = timetravel.snapshot_at(state.history, shown)
        newest = state.history.latest() if state.history is not None else None
        moment = timetravel.marker(snap.time, newest.time if newest else None) if self.paused and snap else ""
        text = status_line(snap, description, paused=self.paused, sort=self.sort.key,
                           reverse=self.sort.reverse, tree=self.tree_view, gpu_filter=self.gpu_filter,
                           filter_text=self.filter_text, problem=state.status if state.problem else "",
                           moment=moment)
        self.query_one("#status", TextLine).show(text)

    def on_screen_resume(self) -> None:
        self.query_one(HistoryPlot).invalidate()
        self._render_selected()

    # -- view state redraws what shows it ----------------------------------------------------------------
    def watch_sort(self) -> None:
        self._render_status()

    def watch_filter_text(self) -> None:
        self._render_status()

    def watch_tree_view(self) -> None:
        self._render_status()

    def watch_gpu_filter(self) -> None:
        self._render_status()

    def watch_selected_gpu(self) -> None:
        self._render_selected()

    def watch_paused(self, paused: bool) -> None:
        self.feed.pause(paused)
        state = self.sources.get(self.selected_source or "")
        self.paused_at = state.snapshot.time if paused and state is not None and state.snapshot is not None else None
        if not paused:
            if self.moment is not None:  # back to live: the live doctor's verdict again
                self.moment = None
                if state is not None:
                    self.diagnosis_arrived(self.selected_source or "", state)
            self._render_selected()
        self._render_status()
