"""One live-doctor evaluation per refresh, served to everyone who asks.

The daemon's ``/metrics`` findings, its ``/api/v1/diagnosis`` (and so every remote dashboard) and the
local dashboard's pane all ask the same question: what does the doctor say about the newest window of
this history? :class:`SharedDiagnosis` answers it once per new snapshot at most, with one
:class:`~gpuwatch.doctor.LiveDoctor` (which remembers since when each finding holds and keeps severities
steady between calls), and hands the same :class:`Evaluation` to every reader until the history moves on.
A thread keeps it at most ``every_s`` old for readers that only look (``/metrics``), counting from the
last time anyone asked (an evaluation, or a check that found it current). (The GPU-hour accounting does
not read it: its steadied view depends on when readers asked, and the accounting must charge a recording
as ``gpuwatch report --replay`` does.) A reader that finds it
behind the newest snapshot refreshes it first, one at a time, so ten clients asking together cost one
evaluation. Other questions (another window, one process) are answered by ``diagnose_current`` and cached
per newest snapshot as well.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuwatch.doctor import RECENT_WINDOW_S, LiveDoctor, diagnose_current
from gpuwatch.doctor.current import window
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)

#: ``(history, window_s, doctor) -> (findings, "")`` or ``(None, why there are none)``.
Judge = Callable[[Sequence[Snapshot], float, LiveDoctor], "tuple[list[Finding] | None, str]"]
#: Other questions kept at once (window, pid): a client cycling through many cannot grow the cache.
MAX_OTHER_QUESTIONS = 8


def judge(history: Sequence[Snapshot], window_s: float, doctor: LiveDoctor) -> tuple[list[Finding] | None, str]:
    """The live doctor over ``history``; its own failures are reported, not raised."""
    if not history:
        return [], ""
    try:
        return doctor(history), ""
    except Exception as exc:  # a bug in one rule must not take /metrics, the API or the pane down
        log.exception("diagnosis failed")
        return None, f"diagnosis failed: {type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class Evaluation:
    """What the doctor said about the window ending at ``end`` (the newest snapshot's time)."""

    #: None: the doctor failed (``note`` says why).
    findings: tuple[Finding, ...] | None
    note: str
    end: float | None
    window_s: float
    #: Snapshots in the window judged.
    snapshots: int
    #: Seconds the evaluation took.
    duration_s: float
    #: The oldest snapshot's time in the window judged: every finding comes from samples in [start, end].
    start: float | None = None
    #: ``watching: 4 of 30 s`` while the window is not full yet (:func:`filling_note`), else "".
    watching: str = ""


class SharedDiagnosis:
    """The live doctor over ``history()``'s newest ``window_s`` seconds, evaluated at most once per new
    snapshot whoever asks; :meth:`start` keeps it fresh every ``every_s`` seconds for readers of
    :attr:`findings`."""

    def __init__(self, history: Callable[[], Sequence[Snapshot]], every_s: float = RECENT_WINDOW_S / 2,
                 window_s: float = RECENT_WINDOW_S, *, judge: Judge = judge,
                 on_refresh: Callable[[Evaluation], None] | None = None) -> None:
        self.history = history
        self.every_s = every_s
        self.window_s = window_s
        self._judge = judge
        self.on_refresh = on_refresh
        self._doctor = LiveDoctor(window_s)
        self._latest: Evaluation | None = None
        self._others: dict[tuple[float, int | None], Evaluation] = {}
        #: Evaluations of the shared question (the live doctor's calls), and of the other questions.
        self.runs = 0
        self.other_runs = 0
        #: The findings of the last evaluation that succeeded: what /metrics serves (a failure keeps them).
        self.findings: tuple[Finding, ...] = ()
        #: ``time.monotonic()`` of the last time the shared evaluation was checked against the history
        #: (evaluated, or found up to date), by anyone; None: never.
        self.checked_at: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def latest(self) -> Evaluation | None:
        return self._latest

    def current(self) -> Evaluation:
        """The evaluation of the newest window: the shared one when it is up to date, else made now."""
        with self._lock:  # one evaluation at a time; those who waited find it made
            self.checked_at = time.monotonic()
            try:
                history = self.history()
            except Exception as exc:
                log.exception("diagnosis: cannot read the history")
                self.runs += 1
                return self._remember(Evaluation(None, f"diagnosis failed: {exc}", None, self.window_s, 0, 0.0))
            end = history[-1].time if history else None
            if self._latest is not None and self._latest.end == end and self._latest.findings is not None:
                return self._latest
            started = time.perf_counter()
            findings, note = self._judge(history, self.window_s, self._doctor)
            self.runs += 1
            evaluation = Evaluation(None if findings is None else tuple(findings), note, end, self.window_s,
                                    _count(history, self.window_s), time.perf_counter() - started,
                                    *_bounds(history, self.window_s))
            return self._remember(evaluation)

    def _remember(self, evaluation: Evaluation) -> Evaluation:
        self._latest = evaluation
        if evaluation.findings is not None:
            self.findings = evaluation.findings
        if self.on_refresh is not None:
            self.on_refresh(evaluation)
        return evaluation

    def ask(self, window_s: float | None = None, pid: int | None = None) -> Evaluation:
        """The findings of the newest ``window_s`` seconds (for ``pid`` alone): the shared evaluation when
        that is the question, else one made for this question, kept until the history moves on."""
        window_s = self.window_s if window_s is None else window_s
        if window_s == self.window_s and pid is None:
            return self.current()
        with self._lock:
            history = self.history()
            end = history[-1].time if history else None
            kept = self._others.get((window_s, pid))
            if kept is not None and kept.end == end:
                return kept
            started = time.perf_counter()
            try:
                found: tuple[Finding, ...] | None = tuple(diagnose_current(history, window_s, pid=pid))
                note = ""
            except Exception as exc:
                log.exception("diagnosis failed")
                found, note = None, f"diagnosis failed: {type(exc).__name__}: {exc}"
            self.other_runs += 1
            evaluation = Evaluation(found, note, end, window_s, _count(history, window_s),
                                    time.perf_counter() - started, *_bounds(history, window_s))
            if len(self._others) >= MAX_OTHER_QUESTIONS:
                self._others.pop(next(iter(self._others)))
            self._others[(window_s, pid)] = evaluation
            return evaluation

    # -- the refresh thread ------------------------------------------------------------------------------
    def next_refresh_in(self) -> float:
        """Seconds until the shared evaluation was last checked ``every_s`` ago; before any check, within
        2 s of starting."""
        if self.checked_at is None:
            return min(self.every_s, 2.0)
        return max(0.0, self.checked_at + self.every_s - time.monotonic())

    def _run(self) -> None:
        while not self._stop.wait(self.next_refresh_in()):
            if self.checked_at is None or self.next_refresh_in() < 0.01:  # nobody looked since
                self.current()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpuwatch-diagnosis", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _count(history: Sequence[Snapshot], window_s: float) -> int:
    if not history:
        return 0
    start = history[-1].time - window_s
    return sum(1 for s in history if s.time >= start)


def _bounds(history: Sequence[Snapshot], window_s: float) -> tuple[float | None, str]:
    """The judged window's oldest snapshot time and its filling note."""
    recent = window(history, window_s)
    return (recent[0].time if recent else None), filling_note(recent, window_s)


def watched_s(snapshots: Sequence[Snapshot]) -> float:
    """Seconds the snapshots cover, counting the first sample's own interval (30 samples 1 s apart: 30 s)."""
    if len(snapshots) < 2:
        return 0.0 if not snapshots else 1.0
    span = snapshots[-1].time - snapshots[0].time
    return span + span / (len(snapshots) - 1)


def filling_note(snapshots: Sequence[Snapshot], window_s: float) -> str:
    """``watching: 4 of 30 s`` while the doctor's window is not full yet, else ``""``: until then the
    doctor has not seen enough to say there is nothing to report (the pane, ``/api/v1/diagnosis``)."""
    seen = watched_s(snapshots)
    return "" if seen >= window_s else f"watching: {seen:.0f} of {window_s:.0f} s"
