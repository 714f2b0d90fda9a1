"""History plots drawn with block characters: GPU-Util with SM activity drawn inside it, and memory.

Why not plotext: a plotext chart redrawn every second costs about as much CPU as the rest of the
dashboard together (docs/architecture.md, costs). Two series of eighth-cell bars say the same thing here:
where the GPU-Util bar towers over the SM-activity bar, the GPU is "busy" with few SMs doing work.
Columns are fixed slices of time (five minutes over the plot's width, ~4 s each at 160 columns) and only
complete slices are drawn: the columns are recomputed, and the changed cells written, once a slice ends,
not at every tick (a window ending "now" moved every slice's bounds each tick and rewrote most of the plot).
The legend above them says what it gives and gives it: the mean of every sample of the last five minutes
up to this tick ("mean of last 5 min"; over a shorter history, "mean since 10:58:46", the first sample's
time, words that stay put while the history fills where a count of seconds rewrote them every tick),
recomputed each tick (one line: only its changed cells are written). The GPU panel beside the plot has this
second's values. A time axis under the bars says how far back they reach. Nothing is computed while the plot is hidden.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Sequence

from rich.text import Text

from gpuwatch.model.metrics import read_metric
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.history import History
from gpuwatch.tui.format import pct
from gpuwatch.tui.widgets.lines import LinesWidget

VBLOCKS = " ▁▂▃▄▅▆▇█"
WINDOW_S = 300.0


def bucket(points: Sequence[tuple[float, float | None]], start: float, end: float, width: int) -> list[float | None]:
    """Mean of the points in each of ``width`` equal time buckets from ``start`` up to (not at) ``end``."""
    sums = [0.0] * width
    counts = [0] * width
    span = max(end - start, 1e-9)
    for t, v in points:
        if v is None or t < start or t >= end:
            continue
        i = min(width - 1, int((t - start) / span * width))
        sums[i] += v
        counts[i] += 1
    return [sums[i] / counts[i] if counts[i] else None for i in range(width)]


def complete_columns(latest: float, width: int) -> tuple[float, float, int]:
    """``(start, end, index)`` of the ``width`` newest complete columns at time ``latest``: columns are
    slices of ``WINDOW_S / width`` seconds counted from the epoch, ``index`` numbers the newest one."""
    span = WINDOW_S / width
    in_progress = math.floor(latest / span)
    return (in_progress - width) * span, in_progress * span, in_progress - 1


def draw(values: list[float | None], height: int, style: str) -> list[Text]:
    """Rows (top first) of a 0-100 bar chart, one column per value, eighth-cell resolution."""
    rows = []
    levels = [0 if v is None else round(max(0.0, min(100.0, v)) / 100 * height * 8) for v in values]
    for r in range(height - 1, -1, -1):
        floor = r * 8
        chars = "".join(VBLOCKS[min(8, max(0, lv - floor))] for lv in levels)
        rows.append(Text(chars, style=style, no_wrap=True))
    return rows


def time_axis(width: int, right: str = "now") -> str:
    """The line under ``width`` columns of bars: ``5 min ago`` under the oldest, ``now`` (or the past moment
    a paused dashboard shows) under the newest, and the middle marked where there is room (``2.5 min``)."""
    left = f"{WINDOW_S / 60:g} min ago"
    middle = f"{WINDOW_S / 120:g} min"
    line = [" "] * width
    if width < len(left) + len(right) + 1:
        return "".join(line[:max(0, width - len(right))]) + right[:width]
    line[:len(left)] = left
    line[width - len(right):] = right
    at = width // 2 - len(middle) // 2
    if at > len(left) + 1 and at + len(middle) < width - len(right) - 1:
        line[at:at + len(middle)] = middle
    return "".join(line)


#: The legend's words, long then short: the shortest fit beside an 80-column GPU panel at 120 columns. Each
#: lead is said two ways: over the whole window (``span``), and since the first sample while it fills (the
#: shortest to the minute).
#: The series, by their keys in the metric catalogue (the values are read through it).
UTIL, SM, MEM = SERIES = ("gpu.util", "gpu.sm_active", "gpu.mem_used_percent")
LEGENDS = ((("mean of last {span}: ", "mean since {since}: "),
            ((UTIL, "GPU-Util"), (SM, "  vs  SM active"), (MEM, "   memory used"))),
           (("mean {span}: ", "since {since}: "), ((UTIL, "util"), (SM, " vs SM"), (MEM, "  mem"))),
           (("avg {span} ", "since {since:.5} "), ((UTIL, "util"), (SM, "SM"), (MEM, "mem"))))


def window_means(points: Sequence[tuple[float, float | None, float | None, float | None]],
                 latest: float) -> tuple[dict[str, float | None], float, float | None]:
    """The mean of each series over the samples in ``(latest - WINDOW_S, latest]``, the seconds those
    samples cover (n samples ``dt`` apart cover ``n * dt``, at most ``WINDOW_S``) and the first one's time."""
    inside = [p for p in points if latest - WINDOW_S < p[0] <= latest]
    means: dict[str, float | None] = {}
    for i, name in enumerate(SERIES, 1):
        values = [v for p in inside if (v := p[i]) is not None]
        means[name] = sum(values) / len(values) if values else None
    if len(inside) < 2:
        return means, 0.0, inside[0][0] if inside else None
    span = inside[-1][0] - inside[0][0]
    return means, min(WINDOW_S, span * len(inside) / (len(inside) - 1)), inside[0][0]


def legend(values: dict[str, float | None], styles: dict[str, str], width: int, span: float = WINDOW_S,
           since: float | None = None) -> Text:
    """The plot's first line, in the longest wording that fits ``width``: ``values`` are the means over the
    last ``span`` seconds, the samples from ``since`` (Unix seconds, said in UTC while the window fills)."""
    full = span >= WINDOW_S - 0.5 or since is None
    words = {"span": f"{WINDOW_S / 60:.0f} min", "since": "" if since is None else
             time.strftime("%H:%M:%S", time.gmtime(since))}
    for leads, labels in LEGENDS:  # one sample so far: it is this second's values, said as such
        lead = leads[0] if full else leads[1]
        text = Text(lead.format(**words) if span > 0 else "now: ", style="dim")
        for key, label in labels:
            text.append(label, style="bold")
            text.append(f" {pct(values[key]).strip()} ", style=styles[key])
        if text.cell_len <= width:
            break
    return text


class HistoryPlot(LinesWidget):
    """Last five minutes of one GPU: GPU-Util vs SM activity, then memory used."""

    DEFAULT_CSS = "HistoryPlot { height: 100%; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: tuple[int, int, int, int, str] | None = None
        self._source: tuple[History, int, str] | None = None
        self._points: deque[tuple[float, float | None, float | None, float | None]] = deque()
        self._points_of: tuple[int, int] | None = None
        self._rows: list[Text] = []
        self.redraws = 0

    def plot(self, history: History, gpu_index: int, end: str = "now") -> None:
        """Redraw the bars when a column completed or the GPU or the size changed, the legend's figures at
        every tick; skipped while hidden. ``end``: what the axis calls the newest column."""
        self._source = (history, gpu_index, end)
        if not self.display or not self.screen.is_current or not self.size.width:
            return
        latest = history.latest()
        if latest is None:
            return
        start, stop, column = complete_columns(latest.time, self._plot_width())
        self._take(history, latest, gpu_index)
        key = (column, gpu_index, self.size.width, self.size.height, end)
        if key != self._key:
            self._key = key
            self._rows = self._compute(start, stop, end)
            self.redraws += 1
        means, span, since = window_means(self._points, latest.time)
        self.set_lines([legend(means, self._styles(), self.size.width, span, since), *self._rows])

    def _take(self, history: History, latest: Snapshot, gpu_index: int) -> None:
        """Keep ``(time, util, sm, mem%)`` points of the window; read only snapshots not seen yet."""
        start = latest.time - WINDOW_S - WINDOW_S / self._plot_width()  # the oldest column starts earlier
        if self._points_of != (id(history), gpu_index) or (self._points and latest.time < self._points[-1][0]):
            self._points.clear()
            self._points_of = (id(history), gpu_index)
        since = self._points[-1][0] if self._points else start
        for s in history.since(since):
            if self._points and s.time <= self._points[-1][0]:
                continue
            g = s.gpu(gpu_index)
            util, sm, mem = (None, None, None) if g is None else (read_metric(k, g) for k in SERIES)
            self._points.append((s.time, util, sm, mem))
        while self._points and self._points[0][0] < start:
            self._points.popleft()

    def invalidate(self) -> None:
        self._key = None

    def on_mount(self) -> None:
        self.watch(self.app, "theme", lambda _: self.on_resize(), init=False)

    def on_resize(self) -> None:
        """A new size needs new columns: recompute from the last history seen."""
        if self._source is not None:
            self._key = None
            self.plot(*self._source)

    def _plot_width(self) -> int:
        return max(10, self.size.width - 6)

    def _styles(self) -> dict[str, str]:
        theme = self.app.current_theme
        return {UTIL: theme.primary, SM: theme.accent or theme.primary, MEM: theme.success or theme.primary}

    def _compute(self, start: float, end: float, end_label: str = "now") -> list[Text]:
        """The plot's rows, for the complete columns between ``start`` and ``end``."""
        width = self._plot_width()
        rows_left = max(4, self.size.height) - 2  # the legend above, the time axis below
        mem_h = max(1, rows_left // 3)
        util_h = max(1, (rows_left - mem_h) // 2)
        sm_h = max(1, rows_left - mem_h - util_h)
        series = {name: [(p[0], p[i]) for p in self._points] for i, name in enumerate(SERIES, 1)}
        columns = {name: bucket(points, start, end, width) for name, points in series.items()}
        styles = self._styles()
        lines = []
        for key, label, height in ((UTIL, "util", util_h), (SM, "SM", sm_h), (MEM, "mem", mem_h)):
            for i, row in enumerate(draw(columns[key], height, styles[key])):
                gutter = Text((label if i == height - 1 else "").rjust(4) + "  ", style="dim")
                gutter.append_text(row)
                lines.append(gutter)
        lines.append(Text(" " * 6 + time_axis(width, end_label), style="dim", no_wrap=True))
        return lines
