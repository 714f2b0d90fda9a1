"""Rollouts: a GPU owner's workload replaced by another, judged before against after as ``compare`` does.

Per GPU, the workload is its owner's and what identifies it: on Kubernetes the owner is the namespace and
container and the workload its image (or, without one, its pod); elsewhere the owner is the user of the
GPU's processes and the workload their command lines (``Snapshot.command_labels``, a worker counted as its
parent's script). A new identity for the same owner is a rollout: the last ``window_s`` of the old
workload is kept as the *before* window; the new one is left to settle for ``settle_s`` and then watched
until its SM activity holds steady over at least ``min_window_s`` (or for ``window_s`` at most, or until
it ends), and the two windows are judged with :func:`~gpuwatch.efficiency.compare.compare`'s rows and
margins plus the doctor's verdict per window (:func:`~gpuwatch.doctor.verdict.verdict`, the finding the
accounting charges). The same identity again (a restart) is no rollout, nor is a GPU going idle: only a
new workload of the same owner within ``idle_grace_s`` of the old one's end counts. A workload replaced
before it settled (a migration step between two versions, a probe beside the server for a moment) is
skipped: what follows it is compared with what came before it. Snapshots carry no throughput or latency,
so live those rows stay "-" and the verdict rests on tensor activity, memory and the doctor.

The detector follows snapshot time, so a replayed recording finds the rollouts the live run would have.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gpuwatch.doctor import diagnose
from gpuwatch.doctor.verdict import verdict
from gpuwatch.efficiency.compare import compare, too_little
from gpuwatch.efficiency.runstats import run_stats
from gpuwatch.model.rollout import Rollout, RolloutRow, RolloutVerdict
from gpuwatch.model.snapshot import Snapshot

#: A worker's label names its parent's script and its place (``serve.py [mp worker 2]``, ``[mp worker 1 of
#: 554]`` without the parent): the place is no part of the workload's identity.
_PLACE = re.compile(r"^(.*?)\s*\[([^\]]*)\]$")
_NUMBERS = re.compile(r"\s*\d+(?: of \d+)?")


def _part(label: str) -> str:
    """A process's share of the identity: its label without a worker's place."""
    m = _PLACE.match(label)
    if m is None:
        return label
    head, inner = m.groups()
    return head or f"[{_NUMBERS.sub('', inner)}]"


#: Snapshots kept for a before-window at most, whatever the interval (15 min at 0.25 s).
MAX_RECENT = 3600


@dataclass(frozen=True)
class RolloutSettings:
    """How long a new workload settles, the most and the least of each window judged, how steady the new
    one's SM activity must be (points between the halves of its window), and how long after the old one
    ended a new one still counts as its replacement."""

    settle_s: float = 120.0
    window_s: float = 600.0
    min_window_s: float = 60.0
    steady_points: float = 5.0
    idle_grace_s: float = 300.0


@dataclass
class _Seen:
    owner: str
    identity: str
    first: float
    last: float


@dataclass
class _Pending:
    before: _Seen
    after: _Seen
    gpu_index: int
    before_window: list[Snapshot]
    after_window: list[Snapshot] = field(default_factory=list)


def workload_of(snap: Snapshot, gpu_index: int, names: dict[int, str] | None = None) -> tuple[str, str] | None:
    """(owner, identity) of the workload on GPU ``gpu_index``, or None when no process holds it;
    ``names``: the snapshot's command labels, when the caller has them already."""
    procs = snap.processes_on(gpu_index)
    if not procs:
        return None
    gpu = snap.gpu(gpu_index)
    labels = gpu.labels if gpu is not None else {}
    main = max(procs, key=lambda p: (p.gpu_memory_bytes or 0, -p.pid))
    pod = main.pod or labels.get("pod")
    if pod:
        namespace = main.namespace or labels.get("namespace", "")
        container = main.container or labels.get("container", "")
        return f"{namespace}/{container}", labels.get("image") or pod
    names = snap.command_labels() if names is None else names
    user = main.user or "?"
    mine = sorted({_part(names.get(p.pid, p.command)) for p in procs if (p.user or "?") == user})
    return user, " + ".join(mine)


def gpu_only(snap: Snapshot, gpu_index: int) -> Snapshot:
    """``snap`` with only GPU ``gpu_index`` and its processes: the numbers judged are that GPU's."""
    pids = {p.pid for p in snap.processes_on(gpu_index)}
    return dataclasses.replace(snap, gpus=tuple(g for g in snap.gpus if g.index == gpu_index),
                               processes=snap.processes_on(gpu_index),
                               stacks=tuple(s for s in snap.stacks if getattr(s, "pid", None) in pids))


class RolloutDetector:
    """Feed every Snapshot in order to :meth:`add`; it returns the rollouts judged at that Snapshot."""

    def __init__(self, settings: RolloutSettings | None = None) -> None:
        self.settings = settings or RolloutSettings()
        self._reset()

    def _reset(self) -> None:
        self._recent: deque[Snapshot] = deque()
        self._current: dict[str, _Seen] = {}
        self._ended: dict[str, _Seen] = {}
        self._pending: dict[str, _Pending] = {}
        self._names_key: tuple[tuple[tuple[object, ...], ...], ...] | None = None
        self._names: dict[int, str] = {}

    def _command_labels(self, snap: Snapshot) -> dict[int, str]:
        """``snap.command_labels()``, made again only when what names a process changed: the labels read the
        pid, name, command line, parent and start time of the processes and feeders alone, and those stay the
        same from tick to tick while a workload runs (making them was most of the detector's tick)."""
        key = (tuple((p.pid, p.name, p.cmdline, p.ppid, p.create_time) for p in snap.processes),
               tuple((f.pid, f.name, f.cmdline) for f in snap.feeders))
        if key != self._names_key:
            self._names_key, self._names = key, snap.command_labels()
        return self._names

    @property
    def pending(self) -> int:
        """Rollouts noticed and waiting for the new workload to settle."""
        return len(self._pending)

    def add(self, snap: Snapshot) -> list[Rollout]:
        s = self.settings
        if self._recent and snap.time < self._recent[-1].time:
            self._reset()  # the clock went back: nothing seen before it can be judged against what follows
        self._recent.append(snap)
        while self._recent and (self._recent[0].time < snap.time - s.window_s - s.idle_grace_s
                                or len(self._recent) > MAX_RECENT):
            self._recent.popleft()
        out: list[Rollout] = []
        seen_gpus = set()
        names = self._command_labels(snap) if snap.processes else {}
        for gpu in snap.gpus:
            if gpu.lost:
                continue
            seen_gpus.add(gpu.uuid)
            out.extend(self._gpu(snap, gpu.uuid, gpu.index, workload_of(snap, gpu.index, names)))
        for uuid in [u for u in self._current if u not in seen_gpus]:
            self._ended[uuid] = self._current.pop(uuid)
            out.extend(self._judge_now(uuid, snap.time))
        return out

    def flush(self) -> list[Rollout]:
        """At the end (a recording that ends, a daemon that stops): judge what waits with what there is."""
        end = self._recent[-1].time if self._recent else 0.0
        return [r for uuid in list(self._pending) for r in self._judge_now(uuid, end)]

    def _gpu(self, snap: Snapshot, uuid: str, index: int, now: tuple[str, str] | None) -> list[Rollout]:
        out: list[Rollout] = []
        cur = self._current.get(uuid)
        if cur is not None and now == (cur.owner, cur.identity):
            cur.last = snap.time
        else:
            if cur is not None:
                self._ended[uuid] = self._current.pop(uuid)
                pending = self._pending.get(uuid)
                if (now is not None and pending is not None and pending.after is cur
                        and cur.last - cur.first < self.settings.settle_s):
                    # It never settled (a step of the rollout, a sidecar alone for a moment): what comes
                    # next replaces the workload before it.
                    self._ended[uuid] = self._pending.pop(uuid).before
                out.extend(self._judge_now(uuid, snap.time))
            if now is not None:
                new = _Seen(now[0], now[1], snap.time, snap.time)
                old = self._ended.pop(uuid, None)
                grace = self.settings.idle_grace_s
                recent = old is not None and old.owner == new.owner and new.first - old.last <= grace
                if old is not None and recent and old.identity == new.identity:
                    old.last, new = snap.time, old  # a restart, or a moment's other process: the same workload
                elif old is not None and recent:
                    self._pending[uuid] = _Pending(old, new, index, self._before(old, index))
                self._current[uuid] = new
        pending = self._pending.get(uuid)
        if pending is not None and self._current.get(uuid) is pending.after:
            if snap.time - pending.after.first >= self.settings.settle_s:
                pending.after_window.append(gpu_only(snap, index))
            if self._ready(pending):
                out.extend(self._judge_now(uuid, snap.time))
        return out

    def _before(self, old: _Seen, index: int) -> list[Snapshot]:
        start = max(old.first, old.last - self.settings.window_s)
        return [gpu_only(x, index) for x in self._recent if start <= x.time <= old.last
                and workload_of(x, index) == (old.owner, old.identity)]

    def _ready(self, p: _Pending) -> bool:
        """The new workload's window is long enough and steady, or as long as a window gets."""
        w = p.after_window
        if len(w) < 2:
            return False
        span = w[-1].time - w[0].time
        if span >= self.settings.window_s:
            return True
        if span < self.settings.min_window_s:
            return False
        half = len(w) // 2
        a, b = _sm(w[:half]), _sm(w[half:])
        return a is None or b is None or abs(a - b) <= self.settings.steady_points

    def _judge_now(self, uuid: str, at: float) -> list[Rollout]:
        p = self._pending.pop(uuid, None)
        return [] if p is None else [judge(uuid, p.gpu_index, p.before, p.after, p.before_window,
                                           p.after_window, at)]


def _sm(window: Sequence[Snapshot]) -> float | None:
    vals = [g.sm_active for s in window for g in s.gpus if g.sm_active is not None]
    return statistics.median(vals) if vals else None


def judge(uuid: str, gpu_index: int, before: _Seen, after: _Seen, before_window: Sequence[Snapshot],
          after_window: Sequence[Snapshot], at: float) -> Rollout:
    """The rollout's rows, doctor's verdicts and overall verdict from its two windows."""
    b, a = run_stats("before", before_window), run_stats("after", after_window)
    base = Rollout(gpu=uuid, gpu_index=gpu_index, owner=before.owner, before=before.identity,
                   after=after.identity, changed_at=before.last, judged_at=at, verdict="inconclusive")
    short = too_little(b) or too_little(a, b)
    if short is not None:
        why = short.replace("before holds", "the old workload's window holds").replace(
            "after holds", "the new workload's window holds").replace("after covers", "the new window covers")
        return dataclasses.replace(base, summary=f"inconclusive: {why}")
    fb, fa = (verdict(diagnose(w), gpu_index) for w in (before_window, after_window))
    rows = tuple(RolloutRow(r.metric.key, r.metric.label, r.metric.unit, r.base, r.new, r.verdict)
                 for r in compare(b, a))
    worse = [r for r in rows if r.verdict == "worse"]
    better = [r for r in rows if r.verdict == "better"]
    doctor = _doctor_change(fb.code if fb else None, fb.severity if fb else None,
                            fa.code if fa else None, fa.severity if fa else None)
    judged = [r for r in rows if r.verdict in ("better", "same", "worse")]
    result: RolloutVerdict
    if worse or doctor == "worse":
        result = "worse"
    elif better or doctor == "better":
        result = "better"
    elif judged or doctor == "same":
        result = "same"
    else:
        result = "inconclusive"
    parts = [_row_text(r) for r in (worse if result == "worse" else better if result == "better" else [])]
    if doctor in ("worse", "better") or not parts or (fb and fa and fb.code != fa.code):
        parts.append(f"doctor: {fb.code if fb else 'nothing'} -> {fa.code if fa else 'nothing'}")
    extra = {"seconds_before": round(b.seconds, 1), "seconds_after": round(a.seconds, 1)}
    return dataclasses.replace(base, verdict=result, rows=rows, finding_before=fb.code if fb else None,
                               finding_after=fa.code if fa else None, summary=f"{result}: " + "; ".join(parts),
                               extra=extra)


def _doctor_change(code_b: str | None, sev_b: str | None, code_a: str | None, sev_a: str | None) -> str | None:
    """worse: the doctor finds a problem (a warning or worse) after and none before; better: the reverse;
    same: one verdict in both; None: nothing to judge (a window without a finding, or two problems)."""
    if code_b is None or code_a is None:
        return None
    problem_b, problem_a = sev_b != "info", sev_a != "info"
    if problem_a != problem_b:
        return "worse" if problem_a else "better"
    return "same" if code_a == code_b else None


def _row_text(r: RolloutRow) -> str:
    return f"{r.label} {r.before:.3g} -> {r.after:.3g} {r.unit}"


def detect(snapshots: Iterable[Snapshot], settings: RolloutSettings | None = None) -> list[Rollout]:
    """Every rollout in a sequence of Snapshots (a recording), those still waiting judged at its end."""
    d = RolloutDetector(settings)
    out = [r for snap in snapshots for r in d.add(snap)]
    return out + d.flush()
