"""The dashboard app and its factory (tests build it exactly as the CLI does).

The app owns the feed: snapshots, alerts and findings arrive as messages from the feed's threads, the app
keeps what it heard per source (:class:`~gpuwatch.tui.screen.SourceState`) and tells its one screen, the
dashboard (:class:`~gpuwatch.tui.actions.DashboardScreen`: widgets and keys), which source changed. Each
widget redraws only what changed.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from textual.app import App
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.screen import Screen

from gpuwatch.tui.actions import DashboardScreen
from gpuwatch.tui.driver import driver_class
from gpuwatch.tui.feed import DiagnosisReady, Feed, FeedStatus, SnapshotReady
from gpuwatch.tui.screen import SourceState
from gpuwatch.tui.terminal_cells import forget as forget_terminal_cells
from gpuwatch.tui.terminal_cells import install as write_changed_cells_only


class Upkeep(Protocol):
    """Housekeeping on the dashboard's event loop, given by the command that runs it (the process's memory is
    the command's business, not the dashboard's): start-up's objects frozen out of the garbage collector's
    walks, the allocator's free pages handed back."""

    def start(self, loop: asyncio.AbstractEventLoop) -> None: ...

    def stop(self) -> None: ...


def _while_shown(handler: Callable[[GpuWatchApp, Any], None]) -> Callable[[GpuWatchApp, Any], None]:
    """Drop feed messages that arrive while the screen is being torn down (the feed's threads run on)."""

    @functools.wraps(handler)
    def guarded(app: GpuWatchApp, msg: Any) -> None:
        try:
            handler(app, msg)  # before the dashboard is up, only the state changes: it draws that on mount
        except NoMatches:
            if app.is_running and not app._closing:
                raise

    return guarded


class GpuWatchApp(App[None]):
    CSS_PATH = "gpuwatch.tcss"
    TITLE = "gpuwatch"
    #: F10 and Ctrl-C quit from any screen, the filter box and the dialogs included, as in htop and nvitop
    #: (Textual's own Ctrl-C only says how to quit).
    #: Ctrl-L redraws the whole screen, as in htop and curses programs: only what changed is written, so text
    #: another program wrote over the dashboard (a ``wall`` message) would otherwise stay until it changes.
    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+c,f10", "quit", "quit", show=False, priority=True),
                                             Binding("ctrl+l", "redraw", "redraw", show=False, priority=True)]

    def __init__(self, feed: Feed, upkeep: Upkeep | None = None) -> None:
        super().__init__()
        write_changed_cells_only()
        self.feed = feed
        self.upkeep = upkeep
        self.sources: dict[str, SourceState] = {}
        #: The dashboard screen: the widgets, the view state and the keys.
        self.dashboard = DashboardScreen(feed, self.sources)

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this terminal, with an input thread that sleeps until there is input."""
        return driver_class(super().get_driver_class())

    def get_default_screen(self) -> Screen[Any]:
        return self.dashboard

    def on_mount(self) -> None:
        self.feed.start(self)
        # Back from a suspension (ctrl+z, or a program run in the foreground) the terminal shows another
        # program's screen: the next frame is written whole.
        self.app_resume_signal.subscribe(self, lambda _app: forget_terminal_cells(), immediate=True)
        if self.upkeep is not None:
            self.upkeep.start(asyncio.get_running_loop())

    def action_redraw(self) -> None:
        """Every widget renders afresh and the frame is written whole (the layout stays as it is)."""
        forget_terminal_cells()
        for widget in self.screen.query("*"):
            widget.refresh()
        self.screen.refresh()

    def on_unmount(self) -> None:
        self.feed.stop()
        if self.upkeep is not None:
            self.upkeep.stop()

    # -- messages from the feed -----------------------------------------------------------------------
    @_while_shown
    def on_snapshot_ready(self, msg: SnapshotReady) -> None:
        state = self.sources.setdefault(msg.source, SourceState())
        state.snapshot, state.alerts, state.history = msg.snapshot, msg.alerts, msg.history
        state.status, state.problem = ("ok", False) if not state.problem else (state.status, state.problem)
        if self.dashboard.is_mounted:
            self.dashboard.snapshot_arrived(msg.source, state)

    @_while_shown
    def on_diagnosis_ready(self, msg: DiagnosisReady) -> None:
        state = self.sources.setdefault(msg.source, SourceState())
        state.findings, state.diagnosis_note = msg.findings, msg.note
        if self.dashboard.is_mounted:
            self.dashboard.diagnosis_arrived(msg.source, state)

    @_while_shown
    def on_feed_status(self, msg: FeedStatus) -> None:
        state = self.sources.setdefault(msg.source, SourceState())
        state.status, state.problem = msg.text, msg.state != "ok"
        if msg.state != "ok":
            self.notify(msg.text, severity="warning" if msg.state == "ended" else "error", timeout=4)
        if self.dashboard.is_mounted:
            self.dashboard.status_changed(msg.source, state)


def make_app(feed: Feed, upkeep: Upkeep | None = None) -> GpuWatchApp:
    """The dashboard over ``feed`` (a LocalFeed around a Sampler, or a RemoteFeed of daemon URLs)."""
    return GpuWatchApp(feed, upkeep)
