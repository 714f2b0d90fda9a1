"""Conditions over a time window: a threshold on the mean (``avg``), jitter, volatility, flapping,
throttle and climb. Windows hold the samples in ``[now - window, now]`` (the closed range of Prometheus 2.x)
so the exported PromQL sees the same points, plus the latest sample before the window for ``offset`` lookups.

Volatility and climb judge each half of their window on its own: one allocation (memory stepping once
from 1 % to 75 % and staying there) changes only the half it falls in, so it is neither swinging memory
nor a leak, while real swings and a real leak show in both halves.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import deque
from operator import itemgetter

from gpuwatch.alerts.conditions import COMPARE, LOOKBACK_S, Evaluator, Results, crossed, read
from gpuwatch.alerts.entities import Frame, Key
from gpuwatch.alerts.rules import Climb, Flapping, Jitter, Threshold, Throttle, Volatility
from gpuwatch.model.snapshot import GpuSample

_time = itemgetter(0)


class Window:
    """The samples of one entity in ``[now - window, now]``, plus the latest one before that (kept while
    it is within ``keep`` seconds): what ``m offset window`` would return in PromQL.

    It also keeps, as samples come and go, the sum of the values and the number of changes between
    consecutive values: a mean, a share or a flap rate then costs nothing per tick, where summing a
    10-minute window of 1 s samples on every tick was most of the rules' cost. The sum is recomputed
    exactly (``math.fsum``) once per window's worth of updates, and at once when the values that went
    through it since are a million times the sum (a 1e11 leaving beside a 0.1: rounding would show), so
    its relative error stays under 1e-9."""

    __slots__ = ("_churn", "_updates", "before", "changes", "ordered", "points", "total")

    def __init__(self, ordered: bool = False) -> None:
        self.points: deque[tuple[float, float]] = deque()
        self.before: tuple[float, float] | None = None
        self.total = 0.0
        self.changes = 0
        self._updates = 0
        self._churn = 0.0
        #: With ``ordered``, the values in the window kept sorted as they come and go (a bisect each): a
        #: quantile then reads two of them, where sorting a 30-minute window of 1 s samples on every tick was
        #: most of the shipped rules' cost once their windows were full. None after a NaN (no order holds):
        #: :meth:`sorted_values` then sorts, as before.
        self.ordered: list[float] | None = [] if ordered else None

    def add(self, t: float, v: float) -> None:
        if self.points and self.points[-1][1] != v:
            self.changes += 1
        self.points.append((t, v))
        self.total += v
        self._counted(v)
        if self.ordered is not None:
            if v != v:  # NaN
                self.ordered = None
            else:
                bisect.insort(self.ordered, v)

    def advance(self, now: float, window_s: float, keep_s: float) -> None:
        start = now - window_s
        while self.points and self.points[0][0] < start:
            self.before = self.points.popleft()
            self.total -= self.before[1]
            if self.points and self.points[0][1] != self.before[1]:
                self.changes -= 1
            self._counted(self.before[1])
            if self.ordered is not None:
                del self.ordered[bisect.bisect_left(self.ordered, self.before[1])]
        if self.before is not None and self.before[0] < start - keep_s:
            self.before = None

    def _counted(self, v: float) -> None:
        self._updates += 1
        self._churn += abs(v)
        if self._updates > len(self.points) or self._churn > 1e6 * abs(self.total):
            self._updates, self._churn = 0, 0.0
            try:
                self.total = math.fsum(v for _, v in self.points)
            except (ValueError, OverflowError):  # +inf and -inf together (or an overflow): NaN, as a plain sum has it
                self.total = sum(v for _, v in self.points)
            self._churn = abs(self.total)

    def mean(self) -> float:
        return self.total / len(self.points)

    def values(self) -> list[float]:
        return [v for _, v in self.points]

    def sorted_values(self) -> list[float]:
        """The values in the window, smallest first (the kept order of an ``ordered`` window)."""
        return self.ordered if self.ordered is not None else sorted(self.values())

    def base(self, now: float, window_s: float) -> float | None:
        """The latest value at or before the window's start, None without one."""
        if self.points and self.points[0][0] <= now - window_s:
            return self.points[0][1]
        return None if self.before is None else self.before[1]

    def at(self, now: float, ago: float) -> float | None:
        """The latest value at or before ``now - ago`` (PromQL's ``m offset ago``), None without one."""
        found = None
        for t, v in self.points:
            if t > now - ago:
                break
            found = v
        if found is None and self.before is not None:
            found = self.before[1]
        return found

    def halves(self, now: float, window_s: float) -> tuple[list[float], list[float]]:
        """Values of ``[now - window, now - window/2]`` and of ``[now - window/2, now]`` (both closed, as
        ``m[w/2] offset w/2`` and ``m[w/2]`` are in Prometheus 2.x: a sample on the midpoint is in both)."""
        return self.older_half(now, window_s), self.recent_half(now, window_s)

    # The points are in time order: the midpoint is found by bisection and each half is a slice, where a
    # test of every point's time was the largest line of the shipped rules' profile once a window was full.
    def older_half(self, now: float, window_s: float) -> list[float]:
        end = bisect.bisect_right(self.points, now - window_s / 2, key=_time)
        return [v for _, v in itertools.islice(self.points, end)]

    def recent_half(self, now: float, window_s: float) -> list[float]:
        start = bisect.bisect_left(self.points, now - window_s / 2, key=_time)
        return [v for _, v in itertools.islice(self.points, start, None)]


class WindowEval(Evaluator):
    """Keeps a :class:`Window` per entity; subclasses reduce it to a value (or None: not holding)."""

    keep_s = 0.0

    def __init__(self, cond: Threshold | Jitter | Volatility | Flapping | Throttle | Climb) -> None:
        super().__init__(cond)
        self.window_s = (cond.avg_s or 0.0) if isinstance(cond, Threshold) else cond.window_s
        self._windows: dict[Key, Window] = {}

    def new_window(self) -> Window:
        return Window()

    def sample(self, frame: Frame, key: Key) -> float | None:
        raise NotImplementedError

    def reduce(self, window: Window, now: float, latched: bool) -> float | None:
        """The condition's value over ``window``, None when it does not hold; ``latched``: the entity's
        alert is active, so hysteresis holds."""
        raise NotImplementedError

    def evaluate(self, frame: Frame, active: frozenset[Key] = frozenset()) -> Results:
        now = frame.now
        out: Results = {}
        keys = frame.keys(self.scope)
        for key in keys:
            window = self._windows.get(key) or self._windows.setdefault(key, self.new_window())
            v = self.sample(frame, key)
            if v is not None:
                window.add(now, v)
            window.advance(now, self.window_s, self.keep_s)
            if v is None:
                continue  # no current value: no result, as an absent series
            value = self.reduce(window, now, key in active)
            if value is not None:
                out[key] = value
        if len(self._windows) > len(keys):
            present = set(keys)
            for key in [k for k in self._windows if k not in present]:
                window = self._windows[key]
                window.advance(now, self.window_s, self.keep_s)
                if not window.points and window.before is None:
                    del self._windows[key]  # gone for longer than the window: forget it
        return out


class AverageThresholdEval(WindowEval):
    """A threshold on the mean over ``avg`` (``avg_over_time(m[avg]) op value``), or on a quantile of it
    (``quantile_over_time(q, m[avg])``): one noisy sample neither starts nor restarts anything."""

    cond: Threshold

    def new_window(self) -> Window:
        return Window(ordered=self.cond.quantile is not None)

    def sample(self, frame: Frame, key: Key) -> float | None:
        return read(frame, key, self.cond.metric)

    def reduce(self, window: Window, now: float, latched: bool) -> float | None:
        q = self.cond.quantile
        value = window.mean() if q is None else quantile(window.sorted_values(), q, is_sorted=True)
        return value if crossed(self.cond, value, latched) else None


def quantile(values: list[float], q: float, is_sorted: bool = False) -> float:
    """The ``q`` quantile as Prometheus's ``quantile_over_time`` computes it (linear between ranks);
    ``is_sorted``: ``values`` are in order already."""
    ordered = values if is_sorted else sorted(values)
    rank = q * (len(ordered) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


class JitterEval(WindowEval):
    """Rose by ``rise`` since the window started and has fallen ``fall`` back from the window's peak:
    ``max_over_time(m[w]) - m >= fall and max_over_time(m[w]) - m offset w >= rise``."""

    cond: Jitter
    keep_s = LOOKBACK_S

    def new_window(self) -> Window:
        return Window(ordered=True)  # the peak is the last of the kept order: no pass over 5 minutes a tick

    def sample(self, frame: Frame, key: Key) -> float | None:
        return read(frame, key, self.cond.metric)

    def reduce(self, window: Window, now: float, latched: bool) -> float | None:
        base = window.base(now, self.window_s)
        if base is None:
            return None
        ordered = window.ordered
        peak = ordered[-1] if ordered else max(v for _, v in window.points)
        current = window.points[-1][1]
        fall = peak - current
        return fall if fall >= self.cond.fall and peak - base >= self.cond.rise else None


def stddev(values: list[float]) -> float:
    """Population standard deviation (Prometheus' ``stddev_over_time``); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(max(0.0, sum([(v - mean) ** 2 for v in values]) / len(values)))  # a list: faster, same sum


class VolatilityEval(WindowEval):
    """Population standard deviation of at least ``stddev`` in each half of the window (``stddev_over_time``
    over ``m[w/2]`` and ``m[w/2] offset w/2``). A single step lies in one half only; swings fill both. The
    value is the recent half's standard deviation."""

    cond: Volatility

    def sample(self, frame: Frame, key: Key) -> float | None:
        return read(frame, key, self.cond.metric)

    def reduce(self, window: Window, now: float, latched: bool) -> float | None:
        if window.changes == 0 and self.cond.stddev > 1e-9 * abs(window.points[-1][1]):
            # Every value in the window is the same (memory that holds still, the usual case): the standard
            # deviation is 0 but for rounding (under 1e-9 of the value), below the threshold either way.
            return None
        sd_recent = stddev(window.recent_half(now, self.window_s))
        if sd_recent < self.cond.stddev:
            return None  # the usual answer: the older half is not even gathered
        return sd_recent if stddev(window.older_half(now, self.window_s)) >= self.cond.stddev else None


class FlappingEval(WindowEval):
    """Percent of state changes of ``metric op value`` between consecutive samples in the window; starts
    at ``high`` and, while the alert is active, stops only below ``low`` (Nagios' flap detection,
    unweighted). Needs a
    sample from a window ago (``... and m offset w`` in PromQL), so a short history is not called flapping."""

    cond: Flapping
    keep_s = LOOKBACK_S

    def sample(self, frame: Frame, key: Key) -> float | None:
        v = read(frame, key, self.cond.metric)
        return None if v is None else float(COMPARE[self.cond.op](v, self.cond.value))

    def reduce(self, window: Window, now: float, latched: bool) -> float | None:
        n = len(window.points)
        if n < 2 or window.base(now, self.window_s) is None:
            return None  # like Nagios, judge flapping only over a full window of history
        pct = 100.0 * window.changes / (n - 1)
        limit = self.cond.low if latched else self.cond.high
        return pct if pct >= limit else None


class ThrottleEval(WindowEval):
    """Percent of samples in the window where any of ``reasons`` held the clocks down. Like flapping it
    needs a whole window of history: one capped sample after a restart is not "capped 100 % of 5 min"."""

    cond: Throttle
    keep_s = LOOKBACK_S

    def sample(self, frame: Frame, key: Key) -> float | None:
        gpu = frame.subject(key)
        assert isinstance(gpu, GpuSample)
        if not gpu.clock_events_known:
            return None
        return 1.0 if gpu.active_clock_events.intersection(self.cond.reasons) else 0.0

    def reduce(self, window: Window, now: float, latched: bool) -> float | None:
        if window.base(now, self.window_s) is None:
            return None
        pct = 100.0 * window.mean()
        return pct if pct >= self.cond.percent else None


class ClimbEval(WindowEval):
    """Heading for a limit: the least-squares line over the window (x relative to now, as Prometheus'
    ``predict_linear``) reaches ``limit`` within ``within``, the metric rose ``rise`` since the window began
    (``m - m offset w``) and at least half of ``rise`` in each half of the window (``m - m offset w/2`` and
    ``m offset w/2 - m offset w``): a climb keeps climbing, a one-off step rises in one half only. A whole
    window of history is needed. The value is the rise over the whole window."""

    cond: Climb
    keep_s = LOOKBACK_S

    def sample(self, frame: Frame, key: Key) -> float | None:
        return read(frame, key, self.cond.metric)

    def reduce(self, window: Window, now: float, latched: bool) -> float | None:
        base = window.base(now, self.window_s)
        points = window.points
        if base is None or len(points) < 2:
            return None
        mid = window.at(now, self.window_s / 2)
        current = points[-1][1]
        rise = current - base
        half = self.cond.rise / 2
        if mid is None or rise < self.cond.rise or current - mid < half or mid - base < half:
            return None  # the cheap conditions first: the line is fitted only for a real climb
        n = len(points)
        mx = sum(t - now for t, _ in points) / n
        my = sum(v for _, v in points) / n
        sxx = sum((t - now - mx) ** 2 for t, _ in points)
        if sxx <= 0:
            return None
        slope = sum((t - now - mx) * (v - my) for t, v in points) / sxx
        projected = my - slope * mx + slope * self.cond.within_s
        return rise if projected >= self.cond.limit else None
