"""What a recording's GPU-seconds must come to, computed here from the snapshots by the definition (not by
the accounting's code): each interval takes the newer snapshot's GPU-Util and SM activity."""

from __future__ import annotations

import itertools
from pathlib import Path

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.model.recording import load, read_header

FAULTS = Path(__file__).resolve().parents[1] / "doctor" / "fixtures" / "faults"


def expected_seconds(path: Path) -> dict[str, float]:
    snaps = load(path)
    gap = max(5.0, 5.0 * read_header(path).interval_s)
    out = dict.fromkeys(("observed", "allocated", "busy", "effective"), 0.0)
    for prev, snap in itertools.pairwise(snaps):
        dt = snap.time - prev.time
        if not 0 < dt <= gap:
            continue
        for g in snap.gpus:
            util = g.gpu_util if g.gpu_util is not None else (g.sm_active or 0.0)
            sm = g.sm_active if g.sm_active is not None else util
            out["observed"] += dt
            if snap.processes_on(g.index) or util > 0 or sm > 0:
                out["allocated"] += dt
                out["busy"] += dt * util / 100.0
                out["effective"] += dt * min(sm, util) / 100.0
    out["lost"] = out["observed"] - out["effective"]
    return out


def expected_cause(path: Path) -> str:
    """The cause the doctor names for the whole recording: the injected class where it names that (all but
    the one variant the accuracy table lists as missed)."""
    top = top_problem(diagnose(load(path)))
    return top.code if top is not None else str(read_header(path).meta["expected"])
