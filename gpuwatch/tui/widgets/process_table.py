"""The process table: GPU processes with their CPU side (busiest thread, RSS, state, IO).

Cost matters here: clearing and refilling a DataTable every second costs ~2.6 % of a core (docs/architecture.md, costs).
So rows are keyed by ``pid:gpu`` in a :class:`RowTable`, which repaints only the rows whose cells changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from gpuwatch.model.snapshot import ProcessSample
from gpuwatch.tui.format import DASH, pct, size
from gpuwatch.tui.widgets.process_tree import tree_order
from gpuwatch.tui.widgets.row_table import Col, RowTable


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    sort_value: Callable[[ProcessSample], Any]
    cell: Callable[[ProcessSample], str | Text]
    compact: bool = True  # shown on narrow terminals


def _num(v: float | None) -> float:
    return -1.0 if v is None else float(v)


def _right(text: str, style: str = "") -> Text:
    return Text(text, justify="right", style=style)


def _thread_cell(p: ProcessSample) -> Text:
    busy = p.top_thread_cpu_percent
    return _right(pct(busy).strip(), "bold yellow" if busy is not None and busy >= 90 else "")


def _state_cell(p: ProcessSample) -> Text:
    waiting = bool(p.threads_in_io_wait)
    label = (p.state or DASH)[:1].upper() if p.state else DASH
    return Text(label + (f"{p.threads_in_io_wait}D" if waiting else ""), style="bold yellow" if waiting else "")


def _io_cell(p: ProcessSample) -> Text:
    if p.io_read_bytes_s is None and p.io_write_bytes_s is None:
        return _right(DASH)
    return _right(f"{size(p.io_read_bytes_s)}/{size(p.io_write_bytes_s)}")


def _pod(p: ProcessSample) -> str:
    return f"{p.namespace}/{p.pod}" if p.pod else ""


COLUMNS: tuple[Column, ...] = (
    Column("pid", "PID", 7, lambda p: p.pid, lambda p: str(p.pid)),
    Column("user", "USER", 8, lambda p: p.user or "", lambda p: (p.user or DASH)[:8], compact=False),
    Column("gpu", "GPU", 3, lambda p: p.gpu_index, lambda p: str(p.gpu_index)),
    Column("gmem", "GPU MEM", 8, lambda p: _num(p.gpu_memory_bytes), lambda p: _right(size(p.gpu_memory_bytes))),
    Column("sm", "SM%", 4, lambda p: _num(p.sm_util), lambda p: _right(pct(p.sm_util).strip())),
    Column("cpu", "CPU%", 5, lambda p: _num(p.cpu_percent), lambda p: _right(pct(p.cpu_percent).strip())),
    Column("thr", "THR%", 5, lambda p: _num(p.top_thread_cpu_percent), _thread_cell),
    Column("rss", "RSS", 6, lambda p: _num(p.rss_bytes), lambda p: _right(size(p.rss_bytes))),
    Column("state", "S", 3, lambda p: p.state or "", _state_cell, compact=False),
    Column("io", "IO R/W", 11, lambda p: _num(p.io_read_bytes_s) + _num(p.io_write_bytes_s), _io_cell,
           compact=False),
    # Shown only when some process runs in a Kubernetes pod (the kubelet source names it).
    Column("pod", "POD", 24, lambda p: _pod(p).lower(), lambda p: (_pod(p) or DASH)[:24], compact=False),
    Column("cmd", "COMMAND", 20, lambda p: (p.cmdline or p.name or "").lower(), lambda p: p.cmdline or p.name or DASH),
)
SORTABLE = tuple(c.key for c in COLUMNS)
LEFT = frozenset({"pid", "user", "gpu", "state", "pod", "cmd"})
ASCENDING_FIRST = frozenset({"pid", "user", "gpu", "cmd", "state", "pod"})
COMPACT_BELOW = 110


def row_key(p: ProcessSample) -> str:
    return f"{p.pid}:{p.gpu_index}"


def matches(p: ProcessSample, needle: str) -> bool:
    """The filter: a case-insensitive substring of pid, user, name, command line or namespace/pod/container."""
    if not needle:
        return True
    needle = needle.lower()
    return any(needle in (s or "").lower() for s in (str(p.pid), p.user, p.name, p.cmdline, _pod(p), p.container))


class ProcessTable(RowTable):
    """Processes keyed ``pid:gpu``; sort, filter, tree and per-GPU view are plain attributes."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sort_key = "gmem"
        self.sort_reverse = True
        self.filter_text = ""
        self.tree_view = False
        self.gpu_filter: int | None = None
        self.columns_shown: tuple[Column, ...] = ()
        self.samples: dict[str, ProcessSample] = {}
        self._all: Sequence[ProcessSample] = ()
        self._width = 0
        self._pods = False

    # -- columns -------------------------------------------------------------------------------------
    def fit(self, width: int) -> None:
        """Choose the columns for ``width`` cells; the command column takes what is left."""
        self._width = width
        cols = [c for c in COLUMNS if (c.compact or width >= COMPACT_BELOW) and (c.key != "pod" or self._pods)]
        fixed = sum(c.width + 2 for c in cols if c.key != "cmd")
        cmd_w = max(12, width - fixed - 3)
        shown = tuple(c if c.key != "cmd" else Column(c.key, c.label, cmd_w, c.sort_value, c.cell) for c in cols)
        if shown == self.columns_shown:
            return
        self.columns_shown = shown
        self.set_columns([Col(c.key, c.label, c.width, c.key not in LEFT) for c in shown])
        self.relabel()
        self.show(self._all)

    def relabel(self) -> None:
        for c in self.columns_shown:
            arrow = ("▼" if self.sort_reverse else "▲") if c.key == self.sort_key else ""
            self.labels[c.key] = c.label + arrow
        self.redraw()

    # -- rows ----------------------------------------------------------------------------------------
    def show(self, processes: Sequence[ProcessSample]) -> None:
        """Bring the table to ``processes``; rows whose cells did not change are not repainted."""
        self._all = processes
        pods = any(p.pod for p in processes)
        if pods != self._pods and self._width:
            self._pods = pods
            self.fit(self._width)  # the POD column comes or goes (only on that change: a second render)
        if not self.columns_shown:
            return
        wanted = [p for p in processes
                  if (self.gpu_filter is None or p.gpu_index == self.gpu_filter) and matches(p, self.filter_text)]
        spec = next(c for c in COLUMNS if c.key == self.sort_key)
        wanted.sort(key=lambda p: (spec.sort_value(p), p.pid), reverse=self.sort_reverse)
        depth: dict[str, str] = {}
        if self.tree_view:
            wanted, depth = tree_order(wanted, row_key)
        self.samples = {row_key(p): p for p in wanted}
        cells = {row_key(p): tuple(self._cell(c, p, depth.get(row_key(p), "")) for c in self.columns_shown)
                 for p in wanted}
        self.set_rows([row_key(p) for p in wanted], cells)

    @staticmethod
    def _cell(c: Column, p: ProcessSample, prefix: str) -> str | Text:
        value = c.cell(p)
        if c.key == "cmd" and prefix:
            return prefix + str(value)
        return value

    def selected(self) -> ProcessSample | None:
        key = self.cursor_key()
        return None if key is None else self.samples.get(key)

    # -- user actions ----------------------------------------------------------------------------------
    def sort_by(self, key: str) -> None:
        """Sort by column ``key``; the same column again flips the direction."""
        if key == self.sort_key:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_key, self.sort_reverse = key, key not in ASCENDING_FIRST
        self.relabel()
        self.show(self._all)

    def cycle_sort(self) -> str:
        keys = [c.key for c in self.columns_shown] or list(SORTABLE)
        nxt = keys[(keys.index(self.sort_key) + 1) % len(keys)] if self.sort_key in keys else keys[0]
        self.sort_key, self.sort_reverse = nxt, nxt not in ASCENDING_FIRST
        self.relabel()
        self.show(self._all)
        return nxt

    def refilter(self) -> None:
        self.show(self._all)
