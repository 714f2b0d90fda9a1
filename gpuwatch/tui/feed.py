"""Where the dashboard's data comes from: threads that know nothing of the UI post small Messages.

The sampler thread (or a daemon's stream, see :mod:`gpuwatch.tui.remote`) posts a
:class:`SnapshotReady` per tick; ``can_replace`` lets a slow terminal drop stale ones and render only the
newest. Alert rules are evaluated on the sampler thread for every snapshot (also the dropped ones, so no
transition is missed) and the doctor runs every few seconds on its own thread: the event loop only draws.
The doctor's verdict is held for the next tick and posted with it, so it is drawn in that tick's frame
rather than in a frame of its own (a second pass of the compositor, another update on the terminal).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from textual.message import Message
from textual.message_pump import MessagePump

from gpuwatch.alerts import AlertEngine
from gpuwatch.diagnosis import SharedDiagnosis
from gpuwatch.doctor import RECENT_WINDOW_S
from gpuwatch.model.alert import Alert
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.model.visible import visible, visible_fields
from gpuwatch.sampler.history import History
from gpuwatch.sampler.sampler import Sampler
from gpuwatch.tui import analysis

Mode = Literal["live", "recording", "remote"]
LOCAL = "local"
DIAGNOSIS_WINDOW_S = RECENT_WINDOW_S  # the doctor judges this much; findings carry since when they hold
DIAGNOSIS_HISTORY_S = 600.0
#: Intervals a verdict waits for the next tick before it is posted alone (paused, or the recording ended).
TICK_WAIT = 1.5
#: How often a paused dashboard's doctor looks for a snapshot it has not judged (a tick that was under way
#: when ``p`` was pressed lands after it): the paused moment's verdict comes in a blink, not a round later.
PAUSED_LOOK_S = 0.5


@dataclass
class SnapshotReady(Message):
    """A new snapshot from ``source`` with that source's alerts (``None``: no alert engine there)."""

    source: str
    snapshot: Snapshot
    alerts: tuple[Alert, ...] | None
    history: History

    def __post_init__(self) -> None:
        # Everything the dashboard shows of a snapshot comes through here: process names, command lines,
        # users, hostnames and labels have their control characters made visible once, for every widget.
        super().__post_init__()
        self.snapshot = visible_fields(self.snapshot)
        self.alerts = visible_fields(self.alerts)

    def can_replace(self, message: Message) -> bool:
        # Called on the older message with a newer one pending: same source -> drop the older one.
        return isinstance(message, SnapshotReady) and message.source == self.source


@dataclass
class DiagnosisReady(Message):
    """The doctor's findings for ``source`` (``None`` with ``note`` saying why there are none)."""

    source: str
    findings: list[Finding] | None
    note: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.findings = visible_fields(self.findings)  # they quote process names
        self.note = visible(self.note)

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DiagnosisReady) and message.source == self.source


@dataclass
class FeedStatus(Message):
    """A source's connection state, in words for the status line."""

    source: str
    state: Literal["ok", "error", "ended"]
    text: str

    def __post_init__(self) -> None:
        super().__post_init__()
        self.text = visible(self.text)  # a daemon's or exporter's error text


class Feed(Protocol):
    mode: Mode
    description: str
    alerts_note: str
    #: Seconds the Diagnosis pane judges (also at a past moment of a paused dashboard).
    diagnosis_window_s: float

    def start(self, target: MessagePump) -> None: ...

    def stop(self) -> None: ...

    def pause(self, paused: bool) -> None: ...


class LocalFeed:
    """An in-process Sampler (live sources or a recording) feeding the dashboard."""

    def __init__(self, sampler: Sampler, description: str, is_recording: bool, *,
                 engine: AlertEngine | None = None, alerts_note: str = "", diagnose_every_s: float = 5.0,
                 run_sampler: bool = True, diagnosis_window_s: float = DIAGNOSIS_WINDOW_S) -> None:
        self.sampler = sampler
        self.description = description
        self.mode: Mode = "recording" if is_recording else "live"
        self.engine = engine
        self.alerts_note = alerts_note
        self.diagnose_every_s = diagnose_every_s
        self.diagnosis_window_s = diagnosis_window_s
        self.diagnosis = SharedDiagnosis(self._recent, diagnose_every_s, diagnosis_window_s, judge=analysis.diagnose)
        self.run_sampler = run_sampler
        self._target: MessagePump | None = None
        self._last: SnapshotReady | None = None
        self._diagnosis: DiagnosisReady | None = None
        self._stop = threading.Event()
        #: Set to wake the doctor thread before its round is due (paused: judge the paused moment now; stop).
        self._wake = threading.Event()
        #: The doctor's verdict waiting for the next tick (taken under the lock), and set once one took it.
        self._held: DiagnosisReady | None = None
        self._held_lock = threading.Lock()
        self._taken = threading.Event()
        self._diag_thread: threading.Thread | None = None
        self._unsubscribe = sampler.subscribe(self._on_snapshot)

    # -- sampler thread -------------------------------------------------------------------------------
    def _on_snapshot(self, snap: Snapshot) -> None:
        alerts: tuple[Alert, ...] | None = None
        if self.engine is not None:
            try:
                self.engine.evaluate(snap)
                alerts = tuple(self.engine.alerts())
            except Exception as exc:  # a broken rule must not stop the dashboard; say so in the pane
                self.alerts_note = f"alert evaluation failed: {type(exc).__name__}: {exc}"
                self.engine = None
        msg = SnapshotReady(LOCAL, snap, alerts, self.sampler.history)
        self._last = msg
        with self._held_lock:
            held, self._held = self._held, None
        if self._target is not None:
            if held is not None:  # drawn with this tick, in one frame
                self._target.post_message(held)
            self._target.post_message(msg)
        if held is not None:
            self._taken.set()

    # -- doctor thread --------------------------------------------------------------------------------
    def _recent(self) -> Sequence[Snapshot]:
        history = self.sampler.history
        latest = history.latest()
        return history.since(latest.time - DIAGNOSIS_HISTORY_S) if latest else []

    def diagnose_now(self) -> DiagnosisReady:
        evaluation = self.diagnosis.current()
        findings = None if evaluation.findings is None else list(evaluation.findings)
        self._diagnosis = DiagnosisReady(LOCAL, findings, evaluation.note)
        return self._diagnosis

    def _diagnose_loop(self) -> None:
        seen = -1
        ended_told = False
        while not self._nap(PAUSED_LOOK_S if seen < 0 or self.sampler.paused else self.diagnose_every_s):
            latest = self.sampler.history.latest()
            if latest is not None and latest.seq != seen:
                seen = latest.seq
                self._hand_over(self.diagnose_now())
            if self.sampler.finished.is_set() and not ended_told and self._target is not None:
                ended_told = True
                self._target.post_message(FeedStatus(LOCAL, "ended", "recording ended"))

    def _nap(self, seconds: float) -> bool:
        """Sleep ``seconds`` or until woken; True once the feed has stopped."""
        self._wake.wait(seconds)
        self._wake.clear()
        return self._stop.is_set()

    def _hand_over(self, msg: DiagnosisReady) -> None:
        """Hold ``msg`` for the next tick to post; post it here if none came within ``TICK_WAIT`` intervals,
        or at once while paused (no tick is coming)."""
        with self._held_lock:
            self._held = msg
            self._taken.clear()
        if self.sampler.paused or not self._taken.wait(self.sampler.interval * TICK_WAIT):
            self._post_held()

    def _post_held(self) -> None:
        with self._held_lock:
            held, self._held = self._held, None
        if held is not None and self._target is not None:
            self._target.post_message(held)

    # -- control from the UI --------------------------------------------------------------------------
    def prime(self, ticks: int) -> None:
        """Take ``ticks`` samples now, on this thread, and diagnose them: deterministic screens for tests."""
        for _ in range(ticks):
            if self.sampler.tick() is None:
                break
        self.diagnose_now()

    def start(self, target: MessagePump) -> None:
        self._target = target
        if self._last is not None:
            target.post_message(self._last)
        if self._diagnosis is not None:
            target.post_message(self._diagnosis)
        if self.run_sampler:
            self.sampler.start()
            self._diag_thread = threading.Thread(target=self._diagnose_loop, name="gpuwatch-doctor", daemon=True)
            self._diag_thread.start()

    def pause(self, paused: bool) -> None:
        self.sampler.pause(paused)
        if paused:  # the verdict held goes now (no tick is coming to carry it); the moment paused at is judged
            self._post_held()  # now too, not at the doctor's next round (seconds later, after the screen settled)
            self._wake.set()

    def stop(self) -> None:
        """Stop sampling; quitting waits at most 2 s even if a source's close() hangs (a stuck driver)."""
        self._stop.set()
        self._wake.set()
        self._taken.set()  # a verdict waiting for a tick waits no more
        self._target = None
        self._unsubscribe()
        closer = threading.Thread(target=self.sampler.stop, kwargs={"timeout": 1.0}, name="gpuwatch-close",
                                  daemon=True)
        closer.start()
        closer.join(2.0)


def local_feed(sampler: Sampler, description: str, is_recording: bool, *,
               rule_paths: Sequence[Path] | None = None, run_sampler: bool = True,
               diagnosis_window_s: float = DIAGNOSIS_WINDOW_S) -> LocalFeed:
    """The feed ``gpuwatch tui`` builds for this machine or a recording; the tests and the screenshots build
    theirs here too, so what they show is what the command shows. No rules given: the shipped ones."""
    engine, note = analysis.load_engine(rule_paths)
    return LocalFeed(sampler, description, is_recording, engine=engine,
                     alerts_note=note, run_sampler=run_sampler, diagnosis_window_s=diagnosis_window_s)
