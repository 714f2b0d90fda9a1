"""The same finding on several GPUs, said once: "GPUs 0, 2, 3, 5, 6: input pipeline CPU-bound".

On an 8-GPU machine one cause (one data loader feeding every GPU) is found once per GPU; listing it eight
times buries everything else. Findings group when they say the same thing: the same code, severity and
title, and evidence and fix that differ only in their numbers. Where a measure differs between GPUs the
group gives its range ("GPU-Util 12–15%") and where an identifier does (a pid, a thread, a GPU) it lists
them ("pid 558/603"), so nothing shown is false for any member of the group.

A group never merges different evidence: two findings about one GPU are about two processes and stay
apart, and a measure that differs by more than a band (a thread pegged at 100 % and one idle at 0 %) keeps
its findings apart, so a range never spans two different stories.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch.model.finding import Finding

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
#: A number right after these words names something (listed, not ranged).
IDENTIFIER = re.compile(r"(?:\bpid|\bprocess|\bthread|\bGPU|--pid|\bworker)\s*$", re.IGNORECASE)
#: How far a measure may differ between members of a group: 10 points, or a quarter of the larger value
#: (GPU-Util 12-15 % on eight GPUs fed by one loader merges; 0 % and 100 % of a core do not).
MERGE_POINTS = 10.0
MERGE_SHARE = 0.25


def skeleton(text: str) -> str:
    """``text`` with its numbers masked: two lines that differ only in numbers have the same skeleton."""
    return NUMBER.sub("#", text)


def merge_numbers(texts: Sequence[str]) -> str:
    """One line for lines of one skeleton: a measure that differs becomes ``low–high`` (as written), an
    identifier ``a/b/c``."""
    first = texts[0]
    if all(t == first for t in texts):
        return first
    columns = list(zip(*(NUMBER.findall(t) for t in texts), strict=True))
    parts = NUMBER.split(first)
    out = [parts[0]]
    for i, numbers in enumerate(columns):
        if IDENTIFIER.search(parts[i]):
            out.append("/".join(sorted(set(numbers), key=float)))
        else:
            low, high = min(numbers, key=float), max(numbers, key=float)
            out.append(low if float(low) == float(high) else f"{low}–{high}")
        out.append(parts[i + 1])
    return "".join(out)


def _close(numbers: Sequence[str]) -> bool:
    values = [abs(float(n)) for n in numbers]
    return max(values) - min(values) <= max(MERGE_POINTS, MERGE_SHARE * max(values))


def same_evidence(texts: Sequence[str]) -> bool:
    """Lines of one skeleton whose measures agree within the band (identifiers may differ)."""
    columns = list(zip(*(NUMBER.findall(t) for t in texts), strict=True))
    parts = NUMBER.split(texts[0])
    return all(IDENTIFIER.search(parts[i]) or _close(numbers) for i, numbers in enumerate(columns))


def _fits(f: Finding, members: Sequence[Finding]) -> bool:
    if any(m.gpu_index == f.gpu_index for m in members):
        return False  # one GPU, two findings: two processes, two stories
    lines = [(f.title, *(m.title for m in members))]
    lines += [(e, *others) for e, *others in zip(f.evidence, *(m.evidence for m in members), strict=True)]
    return all(same_evidence(group) for group in lines)


def id_list(label: str, ids: Sequence[int]) -> str:
    """``GPU 3`` or ``GPUs 0, 2, 3``."""
    return f"{label} {ids[0]}" if len(ids) == 1 else f"{label}s {', '.join(str(i) for i in ids)}"


@dataclass(frozen=True)
class FindingGroup:
    """Findings that say the same thing on different GPUs (or processes); ``finding`` speaks for them,
    with numbers merged into ranges and ``since`` the earliest."""

    finding: Finding
    members: tuple[Finding, ...]

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(sorted({f.gpu_index for f in self.members if f.gpu_index is not None}))

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(sorted({f.pid for f in self.members if f.pid is not None}))

    def where(self) -> list[str]:
        """``["GPUs 0, 2, 3", "pids 558, 603"]``: the parts that name where it holds."""
        return [*([id_list("GPU", self.gpus)] if self.gpus else []),
                *([id_list("pid", self.pids)] if self.pids else [])]


def _key(f: Finding) -> tuple[object, ...]:
    return (f.code, f.severity, skeleton(f.title), tuple(skeleton(e) for e in f.evidence), skeleton(f.fix))


def group_findings(findings: Sequence[Finding]) -> list[FindingGroup]:
    """Groups in the order of their best-ranked member; a finding alone is a group of one."""
    by_key: dict[tuple[object, ...], list[list[Finding]]] = {}
    ordered: list[list[Finding]] = []
    for f in sorted(findings, key=lambda f: f.rank_key):
        candidates = by_key.setdefault(_key(f), [])
        group = next((g for g in candidates if _fits(f, g)), None)
        if group is None:
            group = []
            candidates.append(group)
            ordered.append(group)
        group.append(f)
    out = []
    for members in ordered:
        lead = members[0]
        if len(members) == 1:
            out.append(FindingGroup(lead, (lead,)))
            continue
        sinces = [f.since for f in members if f.since is not None]
        merged = Finding(
            code=lead.code, title=merge_numbers([f.title for f in members]), severity=lead.severity,
            score=max(f.score for f in members), gpu_index=lead.gpu_index, pid=lead.pid,
            evidence=tuple(merge_numbers(lines) for lines in zip(*(f.evidence for f in members), strict=True)),
            fix=merge_numbers([f.fix for f in members]), since=min(sinces) if sinces else None)
        out.append(FindingGroup(merged, tuple(members)))
    return out
