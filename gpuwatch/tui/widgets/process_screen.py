"""Enter on a process: what the snapshot knows about it, grouped so it reads like a description.

The command line comes first, whole; then the process (who, since when, its threads), what it does on the
GPU, on the CPU (its busiest thread and where its threads wait), memory and I/O, and its worker children.
Fields that no group names (a new one on the model) are still shown, under "other"; rows the snapshot has
no value for are left out, so what is shown is what is known.
Memory is in GiB, rates in decimal units per second, as everywhere else on the dashboard.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuwatch.model.process_sample import POLL_TIMER, ProcessSample
from gpuwatch.tui.format import DASH, clock, memory, pct, rate


def _value(name: str, value: Any) -> str:
    if value is None or value == "" or value == ():
        return DASH
    if name.endswith("_bytes_s") or name.endswith("_chars_s"):
        return rate(value)
    if name.endswith("_faults_s"):
        return f"{value:,.0f}"
    if name.endswith("_bytes"):
        return memory(value)
    if name.endswith(("_percent", "_util")):
        return pct(value).strip()
    if name == "create_time":
        return clock(value)
    return str(value)


def _threads(p: ProcessSample) -> str:
    """``558 at 100% (on a core), 561 at 3% (lock)``: the working threads, busiest first."""
    if not p.thread_cpu_percents:
        return DASH
    waits = list(p.thread_waits) + [""] * len(p.thread_cpu_percents)
    return ", ".join(f"{cpu:.0f}%" + (f" ({wait})" if wait else "")
                     for cpu, wait in zip(p.thread_cpu_percents, waits, strict=False))


def _sleeps_in(p: ProcessSample) -> str:
    """``wait_woken, writing to /dev/pts/3``; ``ep_poll, only a timer can end it``: the wait channel, and what
    the blocked call says where the channel alone cannot."""
    text = _value("wait_channel", p.wait_channel)
    if p.write_target:
        return f"{text}, writing to {p.write_target}"
    if p.poll_wait == POLL_TIMER:
        return f"{text}, only a timer can end it"
    return text


def _limit(p: ProcessSample) -> str:
    """``2 cores (cgroup quota), throttled in 94% of its periods``; a dash where no limit is below the host's."""
    if p.cpu_limit_cores is None:
        return DASH
    text = f"{p.cpu_limit_cores:g} cores" + (f" ({p.cpu_limit_by})" if p.cpu_limit_by else "")
    text += "" if p.cpu_throttled_percent is None else f", throttled in {p.cpu_throttled_percent:.0f}% of its periods"
    peers = zip(p.cpu_limit_peer_pids, p.cpu_limit_peer_names, p.cpu_limit_peer_cpu_percents, strict=False)
    return text + "".join(f"; pid {pid} ({name}) {cpu:.0f}% under the same quota" for pid, name, cpu in peers)


Row = tuple[str, tuple[str, ...], Callable[[ProcessSample], str]]


def _one(name: str) -> Callable[[ProcessSample], str]:
    return lambda p: _value(name, getattr(p, name))


def _two(a: str, b: str) -> Callable[[ProcessSample], str]:
    return lambda p: f"{_value(a, getattr(p, a))} / {_value(b, getattr(p, b))}"

#: (group, [(label, the fields it shows, how)]): the fields named here are the ones "other" leaves out.
GROUPS: tuple[tuple[str, tuple[Row, ...]], ...] = (
    ("process", (
        ("pid, parent", ("pid", "ppid"), lambda p: f"{p.pid}, parent {_value('ppid', p.ppid)}"),
        ("user", ("user",), lambda p: _value("user", p.user)),
        ("name, state", ("name", "state"), lambda p: f"{_value('name', p.name)}, state {_value('state', p.state)}"),
        ("started", ("create_time",), lambda p: _value("create_time", p.create_time)),
        ("threads", ("num_threads", "threads_running", "threads_in_io_wait"),
         lambda p: f"{_value('n', p.num_threads)}: {_value('n', p.threads_running)} running, "
                   f"{_value('n', p.threads_in_io_wait)} in I/O wait (D)"),
        ("sleeps in", ("wait_channel", "poll_wait", "write_target"), _sleeps_in),
        ("pod", ("namespace", "pod", "container", "container_id"),
         lambda p: f"{p.namespace}/{p.pod} container {p.container or DASH}" if p.pod
         else _value("container_id", p.container_id)),
        ("work comes from", ("upstream",), lambda p: _value("upstream", p.upstream)),
    )),
    ("on the GPU", (
        ("GPU", ("gpu_index", "kind"), lambda p: f"{p.gpu_index} ({p.kind})"),
        ("GPU memory", ("gpu_memory_bytes",), lambda p: _value("gpu_memory_bytes", p.gpu_memory_bytes)),
        ("share of SM time", ("sm_util",), lambda p: _value("sm_util", p.sm_util)),
        ("share of memory-controller time", ("mem_util",), lambda p: _value("mem_util", p.mem_util)),
    )),
    ("on the CPU (percent of one core)", (
        ("whole process", ("cpu_percent",), lambda p: _value("cpu_percent", p.cpu_percent)),
        ("busiest thread", ("top_thread_cpu_percent", "top_thread_id"),
         lambda p: _value("top_thread_cpu_percent", p.top_thread_cpu_percent)
         + ("" if p.top_thread_id is None else f" (thread {p.top_thread_id})")),
        ("working threads", ("thread_cpu_percents", "thread_waits"), _threads),
        ("their wait for a core", ("thread_run_wait_percents",),
         lambda p: ", ".join(f"{v:.0f}%" for v in p.thread_run_wait_percents) or DASH),
        ("all threads' wait for a core", ("run_wait_percent",),
         lambda p: _value("run_wait_percent", p.run_wait_percent)),
        ("of it in the kernel (system time)", ("cpu_system_percent",), _one("cpu_system_percent")),
        ("its CPU limit", ("cpu_limit_cores", "cpu_limit_by", "cpu_throttled_percent", "cpu_limit_peer_pids",
                           "cpu_limit_peer_names", "cpu_limit_peer_cpu_percents"), _limit),
    )),
    ("memory and I/O", (
        ("resident host memory", ("rss_bytes",), lambda p: _value("rss_bytes", p.rss_bytes)),
        ("storage read / write", ("io_read_bytes_s", "io_write_bytes_s"),
         _two("io_read_bytes_s", "io_write_bytes_s")),
        ("all reads / writes", ("io_read_chars_s", "io_write_chars_s"),
         _two("io_read_chars_s", "io_write_chars_s")),
        ("page faults per second: minor (fresh pages) / major (read from storage)",
         ("minor_faults_s", "major_faults_s"), _two("minor_faults_s", "major_faults_s")),
    )),
    ("worker children (no GPU context)", (
        ("workers / busy (80% of a core or more)", ("workers", "workers_busy"), _two("workers", "workers_busy")),
        ("their CPU together", ("workers_cpu_percent",), _one("workers_cpu_percent")),
    )),
)
SHOWN = frozenset({"cmdline", *(f for _, rows in GROUPS for _, fields, _ in rows for f in fields)})


def details(p: ProcessSample, label: str | None = None) -> Table:
    """The process in groups: ``label`` (its COMMAND on the dashboard) and the whole command line first."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("shown as", Text(label or p.command_label))
    table.add_row("command line", Text(p.cmdline or DASH))
    other = [(f.name, getattr(p, f.name)) for f in dataclasses.fields(p) if f.name not in SHOWN]
    groups = [*GROUPS, ("other", tuple((name.replace("_", " "), (name,), _one(name)) for name, _ in other))] \
        if other else GROUPS
    for title, rows in groups:
        known = [(text, value) for text, _, shown in rows if _known(value := shown(p))]
        if not known:  # a group the snapshot knows nothing of (no pod, no worker children) is left out
            continue
        table.add_row("", "")
        table.add_row(Text(title, style="bold underline"), "")
        for text, value in known:
            table.add_row(Text("  " + text, style="not bold"), Text(value))
    return table


def _known(value: str) -> bool:
    """Whether a row says anything: not only dashes and the words around them ("– / –", "–, parent –")."""
    return any(part not in (DASH, "/", ",") for part in value.replace(",", " , ").split()
               if part.strip("()") != DASH) and value.split()[0] != DASH


class ProcessScreen(ModalScreen[None]):
    """The selected process in full; Esc, Enter or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "close", "close")]
    DEFAULT_CSS = """
    ProcessScreen { align: center middle; }
    ProcessScreen > VerticalScroll { width: 100; max-width: 100%; height: auto; max-height: 100%;
                                     border: round $primary; background: $panel; padding: 0 1; }
    """

    def __init__(self, proc: ProcessSample, label: str | None = None) -> None:
        super().__init__()
        self.proc = proc
        self.label = label

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = f"pid {self.proc.pid} on GPU {self.proc.gpu_index}"
            yield Static(details(self.proc, self.label))

    def action_close(self) -> None:
        self.dismiss(None)
