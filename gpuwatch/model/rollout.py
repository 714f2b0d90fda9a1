"""A rollout: one GPU owner's workload replaced by another, and the before/after verdict on it.

The daemon notices when the workload on a GPU changes (a new container image or pod, or a new command
line for the same user and GPU), waits until the new one has settled, and judges the two windows with the
same rows and margins as ``gpuwatch compare``. The result travels as this record: to the receivers, to
``GET /api/v1/rollouts`` and into ``gpuwatch report``. It lives in the model so that every consumer reads
one shape and none of them imports the detector.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: ``worse``: a judged row regressed beyond its margin; ``better``: a judged row improved and none got
#: worse; ``same``: every judged row within its margin; ``inconclusive``: too little data, or the load
#: changed so much that the windows are not comparable.
RolloutVerdict = Literal["better", "same", "worse", "inconclusive"]


@dataclass(frozen=True, slots=True)
class RolloutRow:
    """One compared quantity (a ``compare`` metric key such as ``sm_active``), before and after."""

    key: str
    label: str
    unit: str
    before: float | None
    after: float | None
    #: better, same, worse, changed, other load, or "-" (not in both windows), as ``compare`` words it.
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "unit": self.unit, "before": self.before,
                "after": self.after, "verdict": self.verdict}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutRow:
        return cls(str(data["key"]), str(data["label"]), str(data["unit"]), data.get("before"),
                   data.get("after"), str(data["verdict"]))


@dataclass(frozen=True, slots=True)
class Rollout:
    """The workload on GPU ``gpu`` (its UUID) of ``owner`` went from ``before`` to ``after``."""

    gpu: str
    owner: str
    #: What identified each workload: the container image, pod or command line.
    before: str
    after: str
    #: When the old workload was last seen and when the new one was judged (Unix seconds).
    changed_at: float
    judged_at: float
    verdict: RolloutVerdict
    rows: tuple[RolloutRow, ...] = ()
    #: The doctor's top finding code in each window, or None when it found nothing.
    finding_before: str | None = None
    finding_after: str | None = None
    #: Why the verdict is what it is, in one line (e.g. "throughput 412 → 301 req/s, worse by 27 %").
    summary: str = ""
    gpu_index: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "gpu_index": self.gpu_index, "owner": self.owner, "before": self.before,
                "after": self.after, "changed_at": self.changed_at, "judged_at": self.judged_at,
                "verdict": self.verdict, "rows": [r.to_dict() for r in self.rows],
                "finding_before": self.finding_before, "finding_after": self.finding_after,
                "summary": self.summary, "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rollout:
        return cls(gpu=str(data["gpu"]), owner=str(data["owner"]), before=str(data["before"]),
                   after=str(data["after"]), changed_at=float(data["changed_at"]),
                   judged_at=float(data["judged_at"]), verdict=data["verdict"],
                   rows=tuple(RolloutRow.from_dict(r) for r in data.get("rows", ())),
                   finding_before=data.get("finding_before"), finding_after=data.get("finding_after"),
                   summary=str(data.get("summary", "")), gpu_index=data.get("gpu_index"),
                   extra=dict(data.get("extra") or {}))
