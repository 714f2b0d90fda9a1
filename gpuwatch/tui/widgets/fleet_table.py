"""The fleet table: one row per host and GPU, the overview when watching several daemons (or GPUs).

Rows are keyed ``source|gpu`` and updated cell by cell like the process table. The highlighted row
picks which host and GPU the panels below show.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from gpuwatch.model.clock_events import SEVERE_REASONS, THROTTLE_REASONS
from gpuwatch.model.snapshot import GpuSample, Snapshot
from gpuwatch.tui.analysis import field
from gpuwatch.tui.format import DASH, num, pct, size

COLUMNS = (("host", "HOST", 16), ("gpu", "GPU", 3), ("name", "NAME", 14), ("util", "UTIL", 5),
           ("sm", "SM ACT", 6), ("occ", "SM OCC", 6), ("mem", "MEM", 13), ("temp", "TEMP", 5),
           ("power", "POWER", 9), ("clocks", "CLOCKS", 14), ("procs", "PROCS", 5), ("alerts", "ALERTS", 6),
           ("status", "STATUS", 24))


def _clocks(g: GpuSample) -> Text:
    worst = [n for n in g.clock_events if n in SEVERE_REASONS] or [n for n in g.clock_events if n in THROTTLE_REASONS]
    if not worst:
        return Text("ok" if g.clock_event_mask is not None else DASH, style="dim")
    return Text(",".join(worst), style="bold red" if worst[0] in SEVERE_REASONS else "bold yellow")


def gpu_cells(host: str, g: GpuSample, nprocs: int, firing: int, status: str) -> tuple[Any, ...]:
    r = Text
    return (host[:16], str(g.index), (g.name or DASH).replace("NVIDIA ", "")[:14],
            r(pct(g.gpu_util).strip(), justify="right"), r(pct(g.sm_active).strip(), justify="right"),
            r(pct(g.sm_occupancy).strip(), justify="right"),
            r(f"{size(g.mem_used_bytes)}/{size(g.mem_total_bytes)}", justify="right"),
            r(num(g.temperature_c, unit="°C"), justify="right"),
            r(f"{num(g.power_w)}/{num(g.power_limit_w)}W", justify="right"), _clocks(g), str(nprocs),
            r(str(firing), style="bold red" if firing else "dim"), status)


class FleetTable(DataTable[Any]):
    """Hosts × GPUs, in the order the sources were given."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row")
        self._cells: dict[str, tuple[Any, ...]] = {}
        self._rows_of: dict[str, list[str]] = {}
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def show(self, source: str, host: str, snap: Snapshot | None, alerts: Sequence[Any] | None,
             status: str) -> None:
        firing_by_gpu: dict[str, int] = {}
        for a in alerts or ():
            if field(a, "state") == "firing":
                gpu = (field(a, "labels", {}) or {}).get("gpu", "")
                firing_by_gpu[gpu] = firing_by_gpu.get(gpu, 0) + 1
        rows: dict[str, tuple[Any, ...]] = {}
        if snap is None or not snap.gpus:
            placeholder = (host[:16], DASH, DASH, "", "", "", "", "", "", "", "", "", status)
            rows[f"{source}|-"] = placeholder
        else:
            for g in snap.gpus:
                firing = firing_by_gpu.get(str(g.index), 0) + firing_by_gpu.get("", 0)
                rows[f"{source}|{g.index}"] = gpu_cells(host, g, len(snap.processes_on(g.index)), firing, status)
        for key in [k for k in self._rows_of.get(source, []) if k not in rows]:
            self.remove_row(key)
            del self._cells[key]
        for key, cells in rows.items():
            old = self._cells.get(key)
            if old is None:
                self.add_row(*cells, key=key)
            else:
                for (col, _, _), new, was in zip(COLUMNS, cells, old, strict=True):
                    if new != was:
                        self.update_cell(key, col, new)
            self._cells[key] = cells
        self._rows_of[source] = list(rows)

    def selected(self) -> tuple[str, int | None] | None:
        if not self._cells or self.cursor_row < 0:
            return None
        try:
            key = str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        except Exception:  # empty or shrinking table: nothing selected
            return None
        source, _, gpu = key.rpartition("|")
        return source, (int(gpu) if gpu.isdigit() else None)

    def select(self, source: str, gpu_index: int) -> None:
        key = f"{source}|{gpu_index}"
        if key in self._cells:
            self.move_cursor(row=self.get_row_index(key), animate=False)
