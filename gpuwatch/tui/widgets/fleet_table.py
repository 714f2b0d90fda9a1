"""The fleet table: one row per host and GPU, the overview when watching several daemons (or GPUs).

Rows are keyed ``source|gpu`` in a :class:`RowTable` (only changed rows are repainted). The highlighted row
picks which host and GPU the panels below show.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from gpuwatch.model.alert import Alert
from gpuwatch.model.clock_events import SEVERE_REASONS, THROTTLE_REASONS, ordered
from gpuwatch.model.metrics import METRICS
from gpuwatch.model.snapshot import GpuSample, Snapshot
from gpuwatch.tui.format import DASH, gib, num, pct
from gpuwatch.tui.widgets.row_table import Col, RowTable

#: Columns of catalogue metrics go by their keys in the catalogue (``model/metrics.py``).
COLUMNS = (("host", "HOST", 24), ("gpu", "GPU", 3), ("name", "NAME", 14), ("gpu.util", "UTIL", 5),
           ("gpu.sm_active", "SM ACT", 6), ("gpu.sm_occupancy", "SM OCC", 6), ("gpu.mem_used_bytes", "MEM GiB", 13),
           ("gpu.temperature_c", "TEMP", 5), ("gpu.power_w", "POWER", 9), ("clocks", "CLOCKS", 14),
           ("procs", "PROCS", 5), ("alerts", "ALERTS", 6), ("status", "STATUS", 40))
TEMP = METRICS["gpu.temperature_c"]
RIGHT = frozenset({"gpu.util", "gpu.sm_active", "gpu.sm_occupancy", "gpu.mem_used_bytes", "gpu.temperature_c",
                   "gpu.power_w", "procs", "alerts"})


def _clocks(g: GpuSample) -> Text:
    names = ordered(g.active_clock_events)
    worst = [n for n in names if n in SEVERE_REASONS] or [n for n in names if n in THROTTLE_REASONS]
    if not worst:
        return Text("ok" if g.clock_events_known else DASH, style="dim")
    return Text(",".join(worst), style="bold red" if worst[0] in SEVERE_REASONS else "bold yellow")


def gpu_cells(host: str, g: GpuSample, nprocs: int, firing: int, status: str) -> tuple[Any, ...]:
    r = Text
    return (host, str(g.index), (g.name or DASH).replace("NVIDIA ", "")[:14],
            r(pct(g.gpu_util).strip(), justify="right"), r(pct(g.sm_active).strip(), justify="right"),
            r(pct(g.sm_occupancy).strip(), justify="right"),
            r(f"{gib(g.mem_used_bytes)}/{gib(g.mem_total_bytes)}", justify="right"),
            r(TEMP.text(g.temperature_c), justify="right"),
            r(f"{num(g.power_w)}/{num(g.power_limit_w)}W", justify="right"), _clocks(g), str(nprocs),
            r(str(firing), style="bold red" if firing else "dim"), status)


class FleetTable(RowTable):
    """Hosts × GPUs, in the order the sources were given."""

    DEFAULT_CSS = "FleetTable { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows_of: dict[str, dict[str, tuple[Any, ...]]] = {}
        #: Sources in the order the user named them (``--connect`` order); others follow as they appear.
        self._order: list[str] = []

    def set_source_order(self, sources: Sequence[str]) -> None:
        self._order = list(sources)

    def on_mount(self) -> None:
        self.set_columns([Col(key, label, width, key in RIGHT) for key, label, width in COLUMNS])

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return 1 + max(1, len(self.keys))

    def show(self, source: str, host: str, snap: Snapshot | None, alerts: Sequence[Alert] | None,
             status: str) -> None:
        firing_by_gpu: dict[str, int] = {}
        for a in alerts or ():
            if a.state == "firing":
                gpu = a.labels.get("gpu", "")
                firing_by_gpu[gpu] = firing_by_gpu.get(gpu, 0) + 1
        rows: dict[str, tuple[Any, ...]] = {}
        if snap is None or not snap.gpus:
            rows[f"{source}|-"] = (host, DASH, DASH, "", "", "", "", "", "", "", "", "", status)
        else:
            for g in snap.gpus:
                firing = firing_by_gpu.get(str(g.index), 0) + firing_by_gpu.get("", 0)
                rows[f"{source}|{g.index}"] = gpu_cells(host, g, len(snap.processes_on(g.index)), firing, status)
        grew = len(rows) != len(self._rows_of.get(source, {}))
        if source not in self._order:
            self._order.append(source)
        self._rows_of[source] = rows
        cells = {k: v for src in self._order for k, v in self._rows_of.get(src, {}).items()}
        self.set_rows(list(cells), cells)
        if grew:
            self.refresh(layout=True)

    def selected(self) -> tuple[str, int | None] | None:
        key = self.cursor_key()
        if key is None:
            return None
        source, _, gpu = key.rpartition("|")
        return source, (int(gpu) if gpu.isdigit() else None)

    def select(self, source: str, gpu_index: int) -> None:
        self.move_to(f"{source}|{gpu_index}")
