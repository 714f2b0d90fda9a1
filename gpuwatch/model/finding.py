"""A Finding: one thing the doctor concluded, with the numbers that show it and the fix to try."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuwatch.model.severity import Severity, severity_rank

#: The verdict that all is well: first among the infos (``rank_key``).
HEALTHY = "healthy"


@dataclass(frozen=True)
class Finding:
    """``score`` ranks findings (roughly: percent of the GPU's capacity the problem costs)."""

    code: str
    title: str
    severity: Severity
    score: float
    gpu_index: int | None
    pid: int | None
    evidence: tuple[str, ...]
    fix: str
    #: Unix time from which the finding has held without a break (set on live histories), or None.
    since: float | None = None
    #: What the feeding thread's sampled stacks say its time goes to (``doctor.mechanisms``), or None.
    mechanism: str | None = None
    #: Its top code locations, (``file.py:function``, share of the samples), most first.
    locations: tuple[tuple[str, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["evidence"] = list(self.evidence)
        out["locations"] = [list(loc) for loc in self.locations]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(code=str(data["code"]), title=str(data["title"]), severity=data["severity"],
                   score=float(data["score"]), gpu_index=data.get("gpu_index"), pid=data.get("pid"),
                   evidence=tuple(str(e) for e in data.get("evidence", ())), fix=str(data.get("fix", "")),
                   since=None if data.get("since") is None else float(data["since"]),
                   mechanism=data.get("mechanism"),
                   locations=tuple((str(loc), float(share)) for loc, share in data.get("locations") or ()))

    @property
    def rank_key(self) -> tuple[int, bool, float, str]:
        """Sort key: more severe first ("healthy" first among infos: it is the verdict), then higher
        score, then code (stable output)."""
        return (severity_rank(self.severity), self.code != HEALTHY, -self.score, self.code)
