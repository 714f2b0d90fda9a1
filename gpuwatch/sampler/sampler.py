"""The sampler owns time: one thread, monotonic deadlines, one Snapshot per tick to every subscriber.

Subscribers are called on the sampler thread and must return quickly (post a message, put on a queue).
A subscriber that raises is logged and kept; nothing a consumer does can stop sampling.

A producer that polls its sources on the tick's own thread (``collect_inline``) names how to give up a poll
past its deadline (``take_over_overdue``): a watchdog thread asks every ``watch_s`` seconds and, when one
was given up, starts a new sampler thread; the hung one ends with :class:`TickTakenOver` if it ever returns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from gpuwatch.model.interval import DEFAULT_HISTORY_S, DEFAULT_INTERVAL_S, MIN_INTERVAL_S, history_capacity
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.history import History

log = logging.getLogger(__name__)

Subscriber = Callable[[Snapshot], None]


class TickTakenOver(Exception):
    """Raised on a sampler thread whose poll returned after the watchdog gave it up: a new thread samples
    on, and this one ends without publishing anything."""


class Producer(Protocol):
    """Makes the next Snapshot: live sources (``LiveCollector``) or a recording (``ReplayProducer``)."""

    def collect(self) -> Snapshot | None: ...

    def close(self) -> None: ...


class Sampler:
    """Runs a Producer every ``interval`` seconds on its own thread."""

    def __init__(self, producer: Producer, interval: float = DEFAULT_INTERVAL_S,
                 history: History | None = None) -> None:
        if interval < MIN_INTERVAL_S:
            raise ValueError(f"interval must be at least {MIN_INTERVAL_S} s, got {interval}")
        self.producer = producer
        self.interval = interval
        # an empty History is falsy (it has a length): test for None, or a caller's empty ring is replaced
        if history is None:
            history = History(capacity=history_capacity(DEFAULT_HISTORY_S, interval))
        self.history = history
        self.latest: Snapshot | None = None
        self.last_tick_s: float = 0.0
        self.ticks = 0
        self.finished = threading.Event()
        #: Why sampling stopped before its producer ran out (None: it did not, or it is still running).
        self.error: str | None = None
        self._subscribers: list[Subscriber] = []
        self._tick_observers: list[Callable[[float], None]] = []
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subscribers:
                    self._subscribers.remove(fn)

        return unsubscribe

    def observe_tick_duration(self, fn: Callable[[float], None]) -> None:
        """``fn(seconds)`` after every tick: for the exporter's own tick-duration histogram."""
        self._tick_observers.append(fn)

    def tick(self) -> Snapshot | None:
        """Take one sample now, on the caller's thread, and hand it to the subscribers."""
        return self._tick(self.producer.collect)

    def _tick(self, collect: Callable[[], Snapshot | None]) -> Snapshot | None:
        t0 = time.perf_counter()
        snap = collect()
        self.last_tick_s = time.perf_counter() - t0
        for obs in self._tick_observers:
            obs(self.last_tick_s)
        if snap is None:
            return None
        self.ticks += 1
        self.latest = snap
        self.history.append(snap)
        with self._lock:
            subscribers = list(self._subscribers)
        for fn in subscribers:
            try:
                fn(snap)
            except Exception:
                log.exception("snapshot subscriber %r failed; it stays subscribed", fn)
        return snap

    def _delay(self, snap: Snapshot) -> float:
        pace = getattr(self.producer, "delay_after", None)
        if pace is not None:
            d = pace(snap)
            if d is not None:
                return float(d)
        return self.interval

    def _run(self) -> None:
        taken_over = False
        try:
            self._loop(getattr(self.producer, "collect_inline", self.producer.collect))
        except TickTakenOver:
            taken_over = True  # this thread's poll hung: the watchdog's new thread samples on
        except Exception as exc:  # a producer that cannot go on (a damaged recording): say so, stop cleanly
            self.error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            if isinstance(exc, ValueError):  # RecordingError and kin: the message is the whole story
                log.error("sampling stopped: %s", self.error)
            else:
                log.exception("sampling stopped: %s", self.error)
        finally:
            if not taken_over:
                self.finished.set()

    def _loop(self, collect: Callable[[], Snapshot | None]) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            if self._paused.is_set():
                self._stop.wait(0.1)
                deadline = time.monotonic()
                continue
            snap = self._tick(collect)
            if snap is None:
                break
            deadline += self._delay(snap)
            now = time.monotonic()
            if deadline < now:  # overran (slow source, suspended laptop): skip, don't burst to catch up
                deadline = now
            self._stop.wait(deadline - now)

    def start(self) -> Sampler:
        if self._thread is None:
            self._thread = self._spawn()
            take_over = getattr(self.producer, "take_over_overdue", None)
            if take_over is not None:
                threading.Thread(target=self._watch, args=(take_over, getattr(self.producer, "watch_s", 1.0)),
                                 name="gpuwatch-sampler-watch", daemon=True).start()
        return self

    def _spawn(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="gpuwatch-sampler", daemon=True)
        thread.start()
        return thread

    def _watch(self, take_over: Callable[[], bool], every_s: float) -> None:
        """Every ``every_s``: a poll hung past its deadline on the sampler thread is given up, and sampling
        goes on from a new thread (the hung one ends if its call ever returns)."""
        while not self._stop.wait(every_s):
            if take_over() and not self._stop.is_set():
                log.warning("a source did not answer within its deadline: sampling goes on from a new thread")
                self._thread = self._spawn()

    def pause(self, paused: bool = True) -> None:
        if paused:
            self._paused.set()
        else:
            self._paused.clear()

    @property
    def paused(self) -> bool:
        return self._paused.is_set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.producer.close()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
