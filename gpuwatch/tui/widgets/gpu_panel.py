"""The GPU panel: GPU-Util side by side with what it hides (SM activity, occupancy, tensor, DRAM bandwidth),
memory, power, clocks, clock-event reasons and PCIe, for the selected GPU.

A health line ("XID 79 (GPU fallen off the bus) 2 min ago", "row remap pending") comes right under the
title only while something is wrong; when all is well it is not there at all. It redraws only when the
GpuSample it shows or the health line's words changed (frozen dataclasses compare by value).
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from gpuwatch.model.clock_events import SEVERE_REASONS, THROTTLE_REASONS, ordered
from gpuwatch.model.metrics import METRICS, MetricSpec, read_metric
from gpuwatch.model.snapshot import GpuSample, HostSample
from gpuwatch.tui.format import bar, energy, gib, num, pct, rate
from gpuwatch.tui.widgets.lines import LinesWidget

LABEL = 10
LINES = 7
#: The catalogue's metrics the panel shows: their labels, ratios and colour levels are the catalogue's.
UTIL, SM_ACTIVE, SM_OCCUPANCY, TENSOR, MEM, DRAM, POWER, TEMP, SM_CLOCK = (METRICS[f"gpu.{k}"] for k in (
    "util", "sm_active", "sm_occupancy", "tensor_active", "mem_used_percent", "dram_active", "power_percent",
    "temperature_c", "sm_clock_percent"))


class Palette:
    """Colours from the active Textual theme, so the panel follows theme changes."""

    def __init__(self, widget: Widget) -> None:
        theme = widget.app.current_theme
        self.primary = theme.primary
        self.memory = theme.success or theme.primary
        self.accent = theme.accent or theme.primary
        self.ok = theme.success or "green"
        self.warning = theme.warning or "yellow"
        self.error = theme.error or "red"


#: ``_half`` lines by what they show: a tick changes a few of the panel's figures, the other halves are reused
#: (building one costs a dozen Text appends). Shared: callers only read them.
_HALVES: dict[tuple[object, ...], Text] = {}
_HALVES_MAX = 256


def _half(label: str, fraction: float | None, value: Text | str, style: str, width: int, value_w: int = 8) -> Text:
    """``label  bar  value`` in exactly ``width`` cells; values right-aligned in ``value_w`` so bars line up."""
    value_text = value if isinstance(value, Text) else Text(value)
    shown = (value_text.plain, tuple(value_text.spans), value_text.style)
    value_len = max(value_w, value_text.cell_len)
    bar_w = max(3, width - LABEL - value_len - 2)
    # what the bar shows: its eighths of a cell (as format.bar counts them), not the exact fraction
    eighths = None if fraction is None else round(min(1.0, max(0.0, fraction)) * bar_w * 8)
    key = (label, eighths, shown, style, width, value_w)
    line = _HALVES.get(key)
    if line is None:
        if len(_HALVES) >= _HALVES_MAX:
            _HALVES.clear()
        line = _HALVES[key] = _build_half(label, fraction, value_text, style, width, value_w)
    return line


def _build_half(label: str, fraction: float | None, value_text: Text, style: str, width: int, value_w: int) -> Text:
    if value_text.cell_len < value_w:
        value_text = Text(" " * (value_w - value_text.cell_len)) + value_text
    bar_w = max(3, width - LABEL - value_text.cell_len - 2)
    line = Text(label.ljust(LABEL)[:LABEL], style="bold")
    line.append_text(bar(fraction, bar_w, style))
    line.append(" ")
    line.append_text(value_text)
    line.truncate(width, pad=True)
    return line


def _prof_value(gpu: GpuSample, metric: str) -> Text:
    value = gpu.prof(metric)
    text = Text(pct(value))
    source = gpu.prof_source(metric)
    text.append(f" {source}" if source else " n/a", style="dim")
    return text


def _bar(spec: MetricSpec, gpu: GpuSample, value: Text | str, style: str, width: int, value_w: int = 8) -> Text:
    """A catalogue metric's row: its label, its share of the whole as a bar, and ``value``."""
    return _half(spec.label, spec.fraction(gpu), value, style, width, value_w)


def _levelled(spec: MetricSpec, gpu: GpuSample, ok: str, pal: Palette) -> str:
    """``ok``, or the warning or error colour once the value reaches the catalogue's levels for it."""
    level = spec.level(read_metric(spec.key, gpu))
    return {None: "dim", "ok": ok, "warning": pal.warning, "critical": pal.error}[level]


def _frac(value: float | None, total: float | None = 100.0) -> float | None:
    if value is None or not total:
        return None
    return float(value) / float(total)


def health_problems(gpu: GpuSample | None, now: float | None) -> tuple[str, ...]:
    """What is wrong with ``gpu``'s health at ``now`` (Unix seconds), in words; empty when all is well."""
    if gpu is None or gpu.health is None or now is None:
        return ()
    return tuple(gpu.health.problems(now))


def _health_line(problems: tuple[str, ...], pal: Palette) -> Text:
    text = Text("health".ljust(LABEL), style=f"bold {pal.error}")
    text.append(" · ".join(problems), style=f"bold {pal.error}")
    return text


def gpu_lines(gpu: GpuSample | None, width: int, pal: Palette, host: HostSample | None = None,
              height: int = LINES, problems: tuple[str, ...] = ()) -> list[Text]:
    """The panel's lines, top first (built one by one: the panel compares them line by line)."""
    if gpu is None:
        return [Text("waiting for the first sample…", style="dim")]
    half = max(30, width // 2)
    right_w = max(0, width - half - 1)
    head = Text(f"GPU {gpu.index} ", style=f"bold {pal.primary}")
    head.append(gpu.name or "unknown GPU", style="bold")
    if gpu.pstate is not None:
        head.append(f"  P{gpu.pstate}")
    if gpu.pcie_link_gen is not None:
        head.append(f"  PCIe gen{gpu.pcie_link_gen} x{gpu.pcie_link_width or '?'}")
    head.append(f"  {gpu.pci_bus_id or ''}", style="dim")
    if not gpu.profiling:
        head.append("  no profiling counters: GPU-Util only", style=pal.warning)
    mem_value = Text(f"{gib(gpu.mem_used_bytes)}/{gib(gpu.mem_total_bytes)} GiB "
                     f"{pct(read_metric(MEM.key, gpu)).strip()}")
    power_value = f"{num(gpu.power_w)}/{num(gpu.power_limit_w)} W"
    clock_value = f"{num(gpu.sm_clock_mhz)}/{num(gpu.sm_clock_max_mhz)} MHz"
    temp = gpu.temperature_c
    vw = 14
    rows = [
        (_bar(UTIL, gpu, UTIL.text(gpu.gpu_util), pal.primary, half, vw),
         _bar(SM_ACTIVE, gpu, _prof_value(gpu, "sm_active"), pal.accent, right_w)),
        (_bar(SM_OCCUPANCY, gpu, _prof_value(gpu, "sm_occupancy"), pal.accent, half, vw),
         _bar(TENSOR, gpu, _prof_value(gpu, "tensor_active"), pal.accent, right_w)),
        (_bar(MEM, gpu, mem_value, _levelled(MEM, gpu, pal.memory, pal), half, vw),
         _bar(DRAM, gpu, _prof_value(gpu, "dram_active"), pal.memory, right_w)),
        (_bar(POWER, gpu, power_value, _levelled(POWER, gpu, pal.primary, pal), half, vw),
         _half(TEMP.label, _frac(temp, 100.0), TEMP.text(temp), _levelled(TEMP, gpu, pal.primary, pal),
               right_w)),
        (_bar(SM_CLOCK, gpu, clock_value, pal.primary, half, vw), _pcie(gpu, right_w)),
    ]
    parts: list[Text | tuple[Text, Text]] = [head]
    if problems:  # under the title, so a short panel loses its last line rather than this one
        parts.append(_health_line(problems, pal))
    parts += rows
    parts.append(_clock_events(gpu, pal))
    room = height - (1 if problems else 0)
    if room > LINES and host is not None:
        parts.append(_host_line(host))
    if room > LINES + 1:
        parts.append(_more_line(gpu))
    lines = []
    for part in parts:  # each line unstyled itself: a part's own style covers its text, not the padding after it
        line = Text()
        if isinstance(part, tuple):
            line.append_text(part[0])
            line.append(" ")
            line.append_text(part[1])
        else:
            line.append_text(part)
        lines.append(line)
    return lines


def render_gpu(gpu: GpuSample | None, width: int, pal: Palette, host: HostSample | None = None,
               height: int = LINES, problems: tuple[str, ...] = ()) -> Text:
    """The panel as one text, a line per row (what :func:`gpu_lines` gives, joined)."""
    return Text("\n", no_wrap=True, overflow="ellipsis").join(gpu_lines(gpu, width, pal, host, height, problems))


def _host_line(h: HostSample) -> Text:
    text = Text("host".ljust(LABEL), style="bold")
    parts = [f"CPU {pct(h.cpu_percent).strip()}" + (f" of {h.cpu_count} cores" if h.cpu_count else ""),
             f"iowait {pct(h.iowait_percent).strip()}", f"load {num(h.load1, '.1f')}",
             f"RAM {gib(h.mem_used_bytes)}/{gib(h.mem_total_bytes)} GiB"]
    text.append(" · ".join(parts))
    return text


def _more_line(g: GpuSample) -> Text:
    text = Text("more".ljust(LABEL), style="bold")
    # energy before the ECC counts: a line too long for the panel is cut at its end, never inside a figure
    # and its unit
    parts = [f"mem clock {num(g.mem_clock_mhz)} MHz", f"mem ctrl {pct(g.mem_util).strip()}",
             f"energy {energy(g.energy_j)}",
             f"ECC {num(g.ecc_corrected)}/{num(g.ecc_uncorrected)} corr/uncorr",
             f"driver {g.driver_version or '?'}"]
    text.append(" · ".join(parts), style="dim")
    return text


def _pcie(gpu: GpuSample, width: int) -> Text:
    rx, tx = gpu.pcie_rx_rate, gpu.pcie_tx_rate
    text = Text("PCIe".ljust(LABEL), style="bold")
    wide = f"rx {rate(rx)}  tx {rate(tx)}"
    text.append(wide if LABEL + len(wide) <= width else f"rx {rate(rx).removesuffix('/s')} tx {rate(tx)}")
    text.truncate(width, pad=True)
    return text


def _clock_events(gpu: GpuSample, pal: Palette) -> Text:
    text = Text("clocks".ljust(LABEL), style="bold")
    if not gpu.clock_events_known:
        text.append("clock-event reasons unknown", style="dim")
        return text
    if not gpu.active_clock_events:
        text.append("no clock events: running at full speed", style=pal.ok)
        return text
    for name in ordered(gpu.active_clock_events):
        if name in SEVERE_REASONS:
            style = f"bold reverse {pal.error}"
        elif name in THROTTLE_REASONS:
            style = f"bold reverse {pal.warning}"
        else:
            style = "dim"
        text.append(f" {name} ", style=style)
        text.append(" ")
    return text


class GpuPanel(LinesWidget):
    """One GPU in detail (plus host lines when there is room); redraws only the lines whose numbers changed."""

    DEFAULT_CSS = "GpuPanel { height: 100%; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.gpu: GpuSample | None = None
        self.host: HostSample | None = None
        self.problems: tuple[str, ...] = ()

    def on_mount(self) -> None:
        self.watch(self.app, "theme", lambda _: self.redraw(), init=False)

    def show(self, gpu: GpuSample | None, host: HostSample | None = None, now: float | None = None) -> None:
        """Show ``gpu``; ``now`` (the snapshot's time) dates its XIDs."""
        problems = health_problems(gpu, now)
        if gpu != self.gpu or host != self.host or problems != self.problems or not self._texts:
            self.gpu, self.host, self.problems = gpu, host, problems
            self.redraw()

    def redraw(self) -> None:
        self.set_lines(gpu_lines(self.gpu, self.size.width, Palette(self), self.host, self.size.height,
                                 self.problems))

    def on_resize(self) -> None:
        self.redraw()
