"""The doctor's current findings for /metrics, refreshed on their own cadence off the event loop.

Judging a window (and stepping back to find since when each finding holds) takes tens of milliseconds on a
long history: too slow for every scrape and never to be run on the event loop. A thread runs
:func:`diagnose_current` every ``interval`` seconds over the sampler's history; scrapes read its last
answer, exported as ``gpuwatch_diagnosis_finding{code,severity,gpu,hostname}``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from gpuwatch.doctor import RECENT_WINDOW_S, LiveDoctor
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)


class DiagnosisPublisher:
    """Keeps the findings of the last ``window`` seconds of ``history()``, refreshed every ``interval``."""

    def __init__(self, history: Callable[[], Sequence[Snapshot]], interval: float,
                 window: float = RECENT_WINDOW_S) -> None:
        self.history = history
        self.interval = interval
        self.window = window
        self._doctor = LiveDoctor(window)
        self.findings: tuple[Finding, ...] = ()
        self.runs = 0
        #: How long the last diagnosis took, in seconds.
        self.last_duration_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> None:
        started = time.perf_counter()
        try:
            self.findings = tuple(self._doctor(list(self.history())))
        except Exception:  # a doctor bug must not take /metrics down; the last findings stay
            log.exception("diagnosis failed; keeping the last findings")
        self.last_duration_s = time.perf_counter() - started
        self.runs += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval if self.runs else min(self.interval, 2.0)):
            self.refresh()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpuwatch-diagnosis", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
