"""The words at the top of the dashboard: the status line, the RECORDING banner, and why ``k`` is refused.

Kept apart from the app so each sentence can be checked by a plain test.
"""

from __future__ import annotations

from rich.text import Text

from gpuwatch.model.snapshot import Snapshot
from gpuwatch.tui.format import clock


def banner_text(description: str, width: int | None = None) -> str:
    """``recording (no NVIDIA driver here): h200-incident.ndjson.gz`` ->
    ``RECORDING: h200-incident.ndjson.gz (no NVIDIA driver here) — replayed, not live``. Narrower than
    ``width`` cells: the note goes, then the file's name; "RECORDING" and "replayed, not live" always stay."""
    rest = description
    note = ""
    if rest.lower().startswith("recording"):
        rest = rest[len("recording"):]
        if rest.startswith(" ("):
            inside, _, rest = rest[2:].partition(")")
            note = f" ({inside})"
        elif " on " in rest.split(":", 1)[0]:
            note = f" (made{rest.split(':', 1)[0]})"
            rest = rest.split(":", 1)[1]
    name = rest.lstrip(" :").strip()
    tail = " — replayed, not live"
    for text in (f"RECORDING: {name}{note}{tail}", f"RECORDING: {name}{tail}", f"RECORDING{tail}"):
        if width is None or len(text) <= width:
            return text
    return f"RECORDING{tail}"


def kill_refusal(mode: str, description: str) -> str | None:
    """Why signals are off in this mode, or ``None`` in live mode (then per-process checks decide)."""
    if mode == "recording":
        return "this is a recording: its pids belong to the machine it was made on, not to processes here"
    if mode == "remote":
        return ("connected to daemons: their processes run on those hosts; the daemon API sends no signals, "
                "so run 'gpuwatch' on that host to signal them")
    return None


def status_line(snap: Snapshot | None, description: str, *, paused: bool, sort: str, reverse: bool, tree: bool,
                gpu_filter: int | None, filter_text: str, problem: str = "", moment: str = "") -> Text:
    """``host · time · what · counts · view`` with PAUSED, stale sources and connection problems marked;
    ``moment``: the paused moment in words (``PAUSED at 14:03:12 (−2 min 10 s)``)."""
    out = Text(" gpuwatch ", style="bold")
    if paused and moment:  # first: a narrow terminal cuts the line's end, and this must stay readable
        out.append(f" {moment} · l live ", style="bold reverse yellow")
        out.append(" ")
    parts = [f"{snap.host.hostname} · {clock(snap.time)}"] if snap is not None else []
    if description:
        parts.append(description)
    out.append(" · ".join(parts))
    if snap is not None:
        n = len(snap.gpus)
        shown = len(snap.processes) if gpu_filter is None else len(snap.processes_on(gpu_filter))
        out.append(f" · {n} GPU{'s' if n != 1 else ''} · {shown} proc")
        h = snap.host
        if h.cpu_percent is not None:
            out.append(f" · host CPU {h.cpu_percent:.0f}%")
            if h.iowait_percent is not None:
                out.append(f" iowait {h.iowait_percent:.0f}%")
        bad = [s for s in snap.sources if s.state != "ok"]
        for s in bad:
            out.append(f" · {s.name} {s.state} {s.age_s:.0f}s", style="bold red")
    view = [f"sort {sort}{'↓' if reverse else '↑'}"]
    if tree:
        view.append("tree")
    if gpu_filter is not None:
        view.append(f"GPU {gpu_filter} only")
    if filter_text:
        view.append(f"filter '{filter_text}'")
    out.append(" · " + ", ".join(view), style="dim")
    if problem:
        out.append(f" · {problem}", style="bold red")
    if paused and not moment:
        out.append("  PAUSED (p resumes)", style="bold reverse yellow")
    return out
