"""The process table: GPU processes with their CPU side (busiest thread, RSS, state, IO).

Cost matters here: clearing and refilling a DataTable every second costs ~2.6 % of a core (docs/architecture.md, costs).
So rows are keyed by ``pid:gpu`` in a :class:`RowTable`, which repaints only the rows whose cells changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.reactive import reactive

from gpuwatch.model.command import command_labels
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.tui.format import DASH, gib, pct, size
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
    Column("gmem", "GPU GiB", 8, lambda p: _num(p.gpu_memory_bytes), lambda p: _right(gib(p.gpu_memory_bytes))),
    Column("sm", "SM%", 4, lambda p: _num(p.sm_util), lambda p: _right(pct(p.sm_util).strip())),
    Column("cpu", "CPU%", 5, lambda p: _num(p.cpu_percent), lambda p: _right(pct(p.cpu_percent).strip())),
    Column("thr", "THR%", 5, lambda p: _num(p.top_thread_cpu_percent), _thread_cell),
    Column("rss", "RSS GiB", 7, lambda p: _num(p.rss_bytes), lambda p: _right(gib(p.rss_bytes))),
    Column("state", "S", 3, lambda p: p.state or "", _state_cell, compact=False),
    Column("io", "IO R/W", 11, lambda p: _num(p.io_read_bytes_s) + _num(p.io_write_bytes_s), _io_cell,
           compact=False),
    # Shown only when some process runs in a Kubernetes pod (the kubelet source names it).
    Column("pod", "POD", 24, lambda p: _pod(p).lower(), lambda p: (_pod(p) or DASH)[:24], compact=False),
    # The table's own labels (``Snapshot.command_labels``: workers named by parent and place) replace these.
    Column("cmd", "COMMAND", 20, lambda p: p.command_label.lower(), lambda p: p.command_label),
)
SORTABLE = tuple(c.key for c in COLUMNS)
LEFT = frozenset({"pid", "user", "gpu", "state", "pod", "cmd"})
ASCENDING_FIRST = frozenset({"pid", "user", "gpu", "cmd", "state", "pod"})
COMPACT_BELOW = 110
#: Cells ←/→ move a long command by (nvitop's horizontal scroll).
SCROLL_STEP = 8


def row_key(p: ProcessSample) -> str:
    return f"{p.pid}:{p.gpu_index}"


def matches(p: ProcessSample, needle: str, label: str | None = None) -> bool:
    """The filter: a case-insensitive substring of pid, user, name, command line, its label (``label``, else
    the process's own) or namespace/pod/container."""
    if not needle:
        return True
    needle = needle.lower()
    return any(needle in (s or "").lower() for s in (str(p.pid), p.user, p.name, p.cmdline,
                                                     label if label is not None else p.command_label, _pod(p),
                                                     p.container))


@dataclass(frozen=True)
class Sort:
    """The process table's order: a column key and whether it runs high to low."""

    key: str = "gmem"
    reverse: bool = True

    def by(self, key: str) -> Sort:
        """Sort by ``key``; the same column again flips the direction (a click on a header, htop's way)."""
        if key == self.key:
            return Sort(key, not self.reverse)
        return Sort(key, key not in ASCENDING_FIRST)

    def step(self, keys: Sequence[str], delta: int) -> Sort:
        """The column ``delta`` places along ``keys`` (``,`` and ``.``, ``s``), in its natural direction."""
        if not keys:
            return self
        nxt = keys[(keys.index(self.key) + delta) % len(keys)] if self.key in keys else keys[0]
        return Sort(nxt, nxt not in ASCENDING_FIRST)

    def flipped(self) -> Sort:
        return Sort(self.key, not self.reverse)


class ProcessTable(RowTable):
    """Processes keyed ``pid:gpu``. The view (sort, filter, tree, one GPU) is reactive: the app binds its
    own state to these with ``data_bind``, and any change re-shows the last processes."""

    sort: reactive[Sort] = reactive(Sort, init=False)
    filter_text: reactive[str] = reactive("", init=False)
    tree_view: reactive[bool] = reactive(False, init=False)
    gpu_filter: reactive[int | None] = reactive(None, init=False)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "scroll_command(-1)", "command ←", show=False),
        Binding("right", "scroll_command(1)", "command →", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cmd_offset = 0
        self.columns_shown: tuple[Column, ...] = ()
        self.samples: dict[str, ProcessSample] = {}
        self._all: Sequence[ProcessSample] = ()
        self._labels: dict[int, str] = {}
        self._width = 0
        self._pods = False
        self._longest_cmd = 0

    # -- the view: any change re-shows ----------------------------------------------------------------
    def watch_sort(self) -> None:
        self.relabel()
        self.show(self._all, self._labels)

    def watch_filter_text(self) -> None:
        self.show(self._all, self._labels)

    def watch_tree_view(self) -> None:
        self.show(self._all, self._labels)

    def watch_gpu_filter(self) -> None:
        self.show(self._all, self._labels)

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
        self.show(self._all, self._labels)

    @property
    def column_keys(self) -> list[str]:
        return [c.key for c in self.columns_shown] or list(SORTABLE)

    def relabel(self) -> None:
        for c in self.columns_shown:
            arrow = ("▼" if self.sort.reverse else "▲") if c.key == self.sort.key else ""
            scrolled = f" ◀+{self.cmd_offset}" if c.key == "cmd" and self.cmd_offset else ""
            self.labels[c.key] = c.label + arrow + scrolled
        self.redraw()

    def action_scroll_command(self, direction: int) -> None:
        """Move the command column sideways so the end of a long command can be read."""
        cmd_w = next((c.width for c in self.columns_shown if c.key == "cmd"), 0)
        longest = self._longest_cmd + self.cmd_offset  # whole commands: a cell may be cut in the middle
        offset = max(0, min(self.cmd_offset + direction * SCROLL_STEP, max(0, longest - cmd_w)))
        if offset != self.cmd_offset:
            self.cmd_offset = offset
            self.relabel()
            self.show(self._all, self._labels)

    # -- rows ----------------------------------------------------------------------------------------
    def show(self, processes: Sequence[ProcessSample], labels: Mapping[int, str] | None = None) -> None:
        """Bring the table to ``processes`` (``labels``: their COMMAND by pid, ``Snapshot.command_labels``);
        rows whose cells did not change are not repainted."""
        self._all = processes
        self._labels = dict(labels) if labels is not None else command_labels(processes)
        pods = any(p.pod for p in processes)
        if pods != self._pods and self._width:
            self._pods = pods
            self.fit(self._width)  # the POD column comes or goes (only on that change: a second render)
        if not self.columns_shown:
            return
        wanted = [p for p in processes
                  if (self.gpu_filter is None or p.gpu_index == self.gpu_filter)
                  and matches(p, self.filter_text, self.label(p))]
        spec = next(c for c in COLUMNS if c.key == self.sort.key)
        if spec.key == "cmd":
            wanted.sort(key=lambda p: (self.label(p).lower(), p.pid), reverse=self.sort.reverse)
        else:
            wanted.sort(key=lambda p: (spec.sort_value(p), p.pid), reverse=self.sort.reverse)
        depth: dict[str, str] = {}
        if self.tree_view:
            wanted, depth = tree_order(wanted, row_key)
        self.samples = {row_key(p): p for p in wanted}
        cells = {row_key(p): tuple(self._cell(c, p, depth.get(row_key(p), "")) for c in self.columns_shown)
                 for p in wanted}
        at = next((i for i, c in enumerate(self.columns_shown) if c.key == "cmd"), -1)
        self._longest_cmd = max((len(str(row[at])) for row in cells.values()), default=0)
        self.set_rows([row_key(p) for p in wanted], self._told_apart(cells))

    def _told_apart(self, cells: dict[str, tuple[str | Text, ...]]) -> dict[str, tuple[str | Text, ...]]:
        """Commands that would look the same once cut to the column (two workers of one launcher differ
        only at the end of their command lines) are cut in the middle instead, keeping their ends."""
        at = next((i for i, c in enumerate(self.columns_shown) if c.key == "cmd"), None)
        if at is None or self.cmd_offset:
            return cells
        width = self.columns_shown[at].width
        cut: dict[str, list[str]] = {}
        for key, row in cells.items():
            text = str(row[at])
            if len(text) > width:
                cut.setdefault(text[:width - 1], []).append(key)
        out = dict(cells)
        for keys in cut.values():
            if len({str(cells[k][at]) for k in keys}) < 2:
                continue
            for k in keys:
                text = str(cells[k][at])
                head = (width - 1) // 2
                tail = width - 1 - head
                middle = text[:head] + "…" + text[len(text) - tail:]
                out[k] = (*cells[k][:at], middle, *cells[k][at + 1:])
        return out

    def label(self, p: ProcessSample) -> str:
        """``p``'s COMMAND: the snapshot's label for it, which tells apart workers of one parent."""
        return self._labels.get(p.pid) or p.command_label

    def _cell(self, c: Column, p: ProcessSample, prefix: str) -> str | Text:
        if c.key == "cmd":
            return (prefix + self.label(p))[self.cmd_offset:]
        return c.cell(p)

    def selected(self) -> ProcessSample | None:
        key = self.cursor_key()
        return None if key is None else self.samples.get(key)
