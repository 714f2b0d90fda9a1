"""Tree order for the process table: children under their parent, siblings in the current sort order.

Only processes in the table take part (the snapshot lists GPU processes, not the whole host), so a
child whose parent is not on a GPU starts its own tree; its parent's pid is shown so the link is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuwatch.model.process_sample import ProcessSample


def tree_order(procs: Sequence[ProcessSample], key: Callable[[ProcessSample], str]
               ) -> tuple[list[ProcessSample], dict[str, str]]:
    """``procs`` (already sorted) reordered depth-first, and a command prefix per row key."""
    pids = {p.pid for p in procs}
    children: dict[int, list[ProcessSample]] = {}
    roots: list[ProcessSample] = []
    for p in procs:
        if p.ppid is not None and p.ppid in pids and p.ppid != p.pid:
            children.setdefault(p.ppid, []).append(p)
        else:
            roots.append(p)
    out: list[ProcessSample] = []
    prefix: dict[str, str] = {}
    expanded: set[int] = set()

    def walk(p: ProcessSample, lead: str, last: bool, depth: int) -> None:
        if depth == 0:
            prefix[key(p)] = f"[{p.ppid}] " if p.ppid is not None else ""
        else:
            prefix[key(p)] = lead + ("└─ " if last else "├─ ")
        out.append(p)
        if p.pid in expanded:  # the same pid on a second GPU: list it, but its children only once
            return
        expanded.add(p.pid)
        kids = children.get(p.pid, [])
        child_lead = lead + ("   " if last else "│  ") if depth else ""
        for i, child in enumerate(kids):
            walk(child, child_lead, i == len(kids) - 1, depth + 1)

    for root in roots:
        walk(root, "", True, 0)
    for p in procs:  # a parent loop (pid reuse mid-sample) has no root: show its members flat
        if key(p) not in prefix:
            walk(p, "", True, 0)
    return out, prefix
