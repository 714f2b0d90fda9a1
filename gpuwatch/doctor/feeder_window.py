"""Each process that feeds a GPU process (``Snapshot.feeders``), reduced over the window to its CPU, wait
classes, I/O and (where sampled) its own stacks, and to what it is bound on: the feeders a finding blames.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuwatch.doctor.stack_window import StackEvidence, process_stacks
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.stacks import StackSample

#: A feeder at this share of a core on its busiest thread, or this much together, is busy (the CPU cut of
#: the GPU process's own pegged thread, ``attribution.PEGGED_THREAD``, and half a core for the whole process).
FEEDER_PEGGED = 85.0
FEEDER_BUSY = 50.0
#: A feeder whose threads are in storage I/O in this share of samples, or that reads or writes this many
#: bytes/s, is bound on storage (the same cuts as the GPU process's ``rules_feed.IO_WAIT_SHARE``/``IO_RATE``).
FEEDER_IO_SHARE = 0.2
FEEDER_IO_RATE = 5e6
#: Share of the feeding thread's samples waiting on a child process (``subprocess.communicate``) from which its
#: children are what it waits for (a majority, as ``rules_evidence.STACK_MAJORITY``).
WAITS_ON_CHILDREN = 0.5
#: Command lines of compilers a GPU process runs as children: a busy one is bound on compiling, not a loader.
COMPILER = re.compile(r"_inductor/compile_worker|(^|/)(nvcc|ptxas|cicc|nvlink)(\s|$)|triton/.*compil")


@dataclass(frozen=True)
class FeederWindow:
    """One feeder over the window (medians), and what it is bound on: ``storage``, ``cpu``, ``gil``,
    ``compile``, ``network``, a stack mechanism, or None (it idles: not a bottleneck)."""

    pid: int
    feeds: int
    relation: str
    label: str
    cpu: float | None
    top_thread_cpu: float | None
    waits: dict[str, float]
    io_bytes_s: float
    io_wait_share: float | None
    stacks: StackEvidence | None
    bound: str | None
    #: Percent of a core its threads spent runnable without one (median): a feeder starved by the host.
    run_wait: float | None = None

    def line(self) -> str:
        cpu = f"CPU {self.cpu or 0:.0f}% (busiest thread {self.top_thread_cpu or 0:.0f}%)"
        waits = ", ".join(f"{100 * s:.0f}% {w}" for w, s in sorted(self.waits.items(), key=lambda x: -x[1])
                          if s >= 0.1)
        io = f", {self.io_bytes_s / 1e6:.0f} MB/s of I/O" if self.io_bytes_s >= FEEDER_IO_RATE else ""
        where = f"; {self.stacks.line('its busiest thread')}" if self.stacks else ""
        return (f"{self.relation} {self.label}: {cpu}" + (f", threads {waits}" if waits else "") + io
                + f": bound on {self.bound or 'nothing (idle)'}" + where)


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _bound(cpu: float | None, top: float | None, waits: dict[str, float], io: float, io_wait: float | None,
           stacks: StackEvidence | None) -> str | None:
    if stacks is not None and stacks.mechanism in ("compile", "storage", "network", "serialization", "host_op",
                                                   "subprocess") and stacks.share(stacks.mechanism) >= 0.3:
        return stacks.mechanism
    if (io_wait or 0.0) >= FEEDER_IO_SHARE or waits.get("io", 0.0) >= FEEDER_IO_SHARE or io >= FEEDER_IO_RATE:
        return "storage"
    if (top or 0.0) >= FEEDER_PEGGED:
        return "cpu"
    if (cpu or 0.0) >= FEEDER_BUSY and waits.get("lock", 0.0) >= 0.3:
        return "gil"
    if (cpu or 0.0) >= FEEDER_BUSY:
        return "cpu"
    if waits.get("input", 0.0) >= 0.5 and io >= FEEDER_IO_RATE:
        return "network"
    return None


def _compiler(bound: str | None, cmdline: str | None) -> str | None:
    """A busy compiler child (its command line says so) is bound on compiling, whatever its CPU says."""
    return "compile" if bound is not None and cmdline and COMPILER.search(cmdline) else bound


def feeder_windows(samples: Sequence[FeederSample], stacks: Sequence[StackSample]) -> list[FeederWindow]:
    """One FeederWindow per (feeder, fed process), busiest first."""
    by: dict[tuple[int, int], list[FeederSample]] = {}
    for f in samples:
        by.setdefault((f.pid, f.feeds), []).append(f)
    out = []
    for (pid, feeds), fs in by.items():
        last = fs[-1]
        waits = Counter(w for f in fs for w in f.thread_waits)
        n = sum(waits.values())
        shares = {w: c / n for w, c in waits.items()} if n else {}
        io = (_median(f.io_read_bytes_s for f in fs) or 0.0) + (_median(f.io_write_bytes_s for f in fs) or 0.0)
        flags = [f.threads_in_io_wait > 0 for f in fs if f.threads_in_io_wait is not None]
        io_wait = sum(flags) / len(flags) if flags else None
        cpu, top = _median(f.cpu_percent for f in fs), _median(f.top_thread_cpu_percent for f in fs)
        ev = process_stacks(stacks, pid, None)
        name = last.name or (last.cmdline or "").split(" ")[0] or "?"
        label = f"pid {pid} ({name})" + (f" `{last.cmdline[:60]}`" if last.cmdline else "")
        out.append(FeederWindow(pid, feeds, last.relation, label, cpu, top, shares, io, io_wait, ev,
                                _compiler(_bound(cpu, top, shares, io, io_wait, ev), last.cmdline),
                                run_wait=_median(f.run_wait_percent for f in fs)))
    return sorted(out, key=lambda w: (w.bound is None, -(w.cpu or 0.0), w.pid))


def waited_on(feeders: list[FeederWindow], ev: StackEvidence | None) -> list[FeederWindow]:
    """A process whose feeding thread mostly waits on the children it spawns blocks on them: its children
    are bound on ``subprocess`` (what the parent waits for) however briefly each lives (a child spawned per
    item is often gone before its CPU can be measured)."""
    if ev is None or ev.share("subprocess") < WAITS_ON_CHILDREN:
        return feeders
    return [dataclasses.replace(f, bound="subprocess") if f.bound is None and f.relation == "child" else f
            for f in feeders]
