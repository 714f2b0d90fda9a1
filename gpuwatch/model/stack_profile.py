"""The reduced form of sampled stacks that findings quote: a thread's few dominant frames.

``gpuwatch doctor --stacks`` adds "py-spy, 120 samples of thread 558: 62 % of samples in tokenizer.py:encode"
to the findings about a CPU thread. The stacks come from the Snapshots (the stack source samples them in the
background, live or in a recording); this reduces them to a :class:`StackProfile` per process.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from gpuwatch.model.snapshot import Snapshot
from gpuwatch.model.stacks import Frame, StackProfile, ThreadStack

TOP_FRAMES = 5


def leaf_label(frames: tuple[Frame, ...]) -> str | None:
    """The innermost Python frame (what the code was doing), else the innermost frame; None for no frames."""
    for frame in frames:
        if not frame.native:
            return frame.label()
    return frames[0].label() if frames else None


def _thread_of(stacks: list[ThreadStack], preferred: int | None) -> int | None:
    per_tid: Counter[int] = Counter()
    for s in stacks:
        per_tid[s.tid] += s.count
    if preferred is not None and preferred in per_tid:
        return preferred
    return per_tid.most_common(1)[0][0] if per_tid else None


def stack_profiles(snapshots: Iterable[Snapshot]) -> dict[int, StackProfile]:
    """Per process with sampled stacks: its feeding thread (the busiest thread the host source named most
    often, else the most sampled) and that thread's innermost frames, most common first."""
    stacks: dict[int, list[ThreadStack]] = {}
    top: dict[int, Counter[int]] = {}
    for snap in snapshots:
        for sample in snap.stacks:
            stacks.setdefault(sample.pid, []).extend(sample.stacks)
        for p in snap.processes:
            if p.top_thread_id is not None and (p.top_thread_cpu_percent or 0.0) > 0:
                top.setdefault(p.pid, Counter())[p.top_thread_id] += 1
    out: dict[int, StackProfile] = {}
    for pid, found in stacks.items():
        named = top.get(pid)
        tid = _thread_of(found, named.most_common(1)[0][0] if named else None)
        counts: Counter[str] = Counter()
        for s in found:
            label = leaf_label(s.frames) if s.tid == tid else None
            if label is not None:
                counts[label] += s.count
        n = sum(counts.values())
        if n:
            out[pid] = StackProfile(pid, tid, n, tuple((frame, c / n) for frame, c in counts.most_common(TOP_FRAMES)))
    return out
