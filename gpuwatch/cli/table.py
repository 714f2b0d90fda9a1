"""Plain-text rendering of one Snapshot for ``gpuwatch snapshot`` (rich tables, no colour when piped)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuwatch.model.clock_events import ordered
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.model.visible import visible, visible_fields
from gpuwatch.tui.format import gib


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}%"


def _of(value: float | None, limit: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if limit is None else f"{value:.0f}/{limit:.0f}"


def _gib(v: int | None) -> str:
    """Memory in GiB, as the dashboard gives it (``tui.format.gib``)."""
    return "-" if v is None else gib(v)


def render_snapshot(snap: Snapshot, description: str = "", width: int = 140) -> str:
    """The tables as text. Every string from the host (process names, command lines, users, the hostname,
    GPU names, source messages) has its control characters made visible first, and nothing is read as rich
    markup: a process named ``\x1b]52;...`` or ``[/]`` shows as written and steers nothing."""
    snap = visible_fields(snap)
    description = visible(description)
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None, markup=False,
                      highlight=False)
    import datetime as _dt

    when = _dt.datetime.fromtimestamp(snap.time).strftime("%Y-%m-%d %H:%M:%S")
    console.print(f"{snap.host.hostname}  {when}  {description}")
    gt = Table(box=None, pad_edge=False)
    for col in ("GPU", "name", "GPU-Util", "SM act", "SM occ", "tensor", "DRAM", "mem GiB", "temp",
                "power W", "SM MHz", "clock events"):
        gt.add_column(col, justify="left" if col in ("name", "clock events") else "right")
    for g in snap.gpus:
        mem = f"{_gib(g.mem_used_bytes)}/{_gib(g.mem_total_bytes)}"
        power = _of(g.power_w, g.power_limit_w)
        clock = _of(g.sm_clock_mhz, g.sm_clock_max_mhz)
        gt.add_row(str(g.index), Text(g.name or "-"), _pct(g.gpu_util), _pct(g.sm_active), _pct(g.sm_occupancy),
                   _pct(g.tensor_active), _pct(g.dram_active), mem,
                   "-" if g.temperature_c is None else f"{g.temperature_c:.0f}C", power, clock,
                   ",".join(ordered(g.active_clock_events)) or ("none" if g.clock_events_known else "-"))
    console.print(gt)
    for g in snap.gpus:  # only what is wrong: nothing at all on healthy GPUs
        problems = [] if g.health is None else g.health.problems(snap.time)
        if problems:
            console.print(f"GPU {g.index} health: {' · '.join(problems)}")
    pt = Table(box=None, pad_edge=False)
    for col in ("PID", "GPU", "user", "GPU GiB", "SM", "CPU", "top thr", "RSS GiB", "S", "command"):
        pt.add_column(col, justify="left" if col in ("user", "command", "S") else "right")
    labels = snap.command_labels()  # the dashboard's COMMAND, workers named by parent and place
    for p in snap.processes:
        pt.add_row(str(p.pid), str(p.gpu_index), Text(p.user or "-"), _gib(p.gpu_memory_bytes),
                   _pct(p.sm_util), _pct(p.cpu_percent), _pct(p.top_thread_cpu_percent),
                   _gib(p.rss_bytes), Text(p.state or "-"), Text(labels.get(p.pid, p.command_label)[:60]))
    if snap.processes:
        console.print(pt)
    else:
        console.print("no processes on the GPUs")
    bad = [s for s in snap.sources if s.state != "ok"]
    for s in bad:
        console.print(f"source {s.name}: {s.state} for {s.age_s:.0f} s: {s.message}")
    return out.getvalue()
