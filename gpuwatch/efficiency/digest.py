"""The weekly digest's content: per owner, GPU-hours allocated and lost by cause, the top fix, the trend
against the window before, and the rollouts; with the fleet's funnel and the consolidation advice.

Built from two roll-ups (the window and the one of the same length before it) so a daemon can send it on
a schedule and ``gpuwatch report --format markdown`` can print it; :mod:`gpuwatch.efficiency.digest_markdown`
writes it out. Rollouts come from the caller (the daemon's detector keeps them), none by default; each is
listed under the owner whose name (``Owner.text``) equals its ``owner``, and all of them in their own section.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuwatch.efficiency.consolidation import Consolidation, consolidate
from gpuwatch.efficiency.rows import Owner
from gpuwatch.efficiency.store import Rollup
from gpuwatch.efficiency.summary import Summary, summarise
from gpuwatch.model.rollout import Rollout

#: Owners named one by one (biggest loss first); the rest are counted in one line.
MAX_OWNERS_SHOWN = 20


@dataclass(frozen=True)
class Usage:
    """An owner's GPU-seconds in one window (allocated and effective None: the roll-ups predate owner rows)."""

    lost: float
    allocated: float | None = None
    effective: float | None = None

    @property
    def efficiency(self) -> float | None:
        if self.allocated is None or self.effective is None or self.allocated <= 0:
            return None
        return 100.0 * self.effective / self.allocated


@dataclass(frozen=True)
class OwnerDigest:
    owner: str
    now: Usage
    #: Lost seconds by cause, biggest first.
    causes: list[tuple[str, float]]
    #: The window before (None: the owner had no roll-ups there).
    before: Usage | None
    rollouts: list[Rollout] = field(default_factory=list)

    @property
    def top_cause(self) -> str | None:
        return self.causes[0][0] if self.causes else None


@dataclass(frozen=True)
class Digest:
    window_s: float
    summary: Summary
    #: The window of the same length before (None: no roll-ups there).
    previous: Summary | None
    owners: list[OwnerDigest]
    consolidation: Consolidation
    rollouts: list[Rollout]


def _usage(rollup: Rollup) -> tuple[dict[str, Usage], dict[str, dict[str, float]]]:
    lost: dict[str, float] = defaultdict(float)
    causes: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for k, seconds in rollup.lost:
        lost[k.owner.text] += seconds
        causes[k.owner.text][k.cause] += seconds
    alloc: dict[str, tuple[float, float]] = {}
    for r in rollup.owners:
        a, e = alloc.get(r.key.owner.text, (0.0, 0.0))
        alloc[r.key.owner.text] = (a + r.use.allocated, e + r.use.effective)
    out = {n: Usage(lost.get(n, 0.0), *alloc[n]) if n in alloc else Usage(lost.get(n, 0.0))
           for n in set(lost) | set(alloc)}
    return out, causes


def owns(owner: str, rollout_owner: str) -> bool:
    """Whether the roll-ups' owner (``user:command`` or ``namespace/pod/container``) is the rollout's (its
    user, or ``namespace/container``: a rollout changes the command or the pod, so they are not in it)."""
    if owner == rollout_owner:
        return True
    if "/" not in rollout_owner:
        return owner.partition(":")[0] == rollout_owner and "/" not in owner
    namespace, _, container = rollout_owner.partition("/")
    parts = owner.split("/")
    return len(parts) == 3 and parts[0] == namespace and parts[2] == container


def _rollouts_of(owner: str, owners: Sequence[str], rollouts: Sequence[Rollout]) -> list[Rollout]:
    """The rollouts that are ``owner``'s and no other listed owner's (two deployments of one namespace
    with one container name are told apart by their pods, which a rollout replaces: such a rollout is
    listed for the fleet only)."""
    return [r for r in rollouts if owns(owner, r.owner) and sum(owns(o, r.owner) for o in owners) == 1]


def build(current: Rollup, previous: Rollup, since: float, until: float, source: str, window_s: float,
          rollouts: Sequence[Rollout] = ()) -> Digest:
    """The digest of ``current`` (``since`` to ``until``) against ``previous`` (the window before)."""
    summary = summarise(current, since, until, source)
    before = summarise(previous, since - window_s, since, source) if previous.seconds else None
    now, causes = _usage(current)
    then, _ = _usage(previous)
    ranked = sorted(now, key=lambda n: (-now[n].lost, -(now[n].allocated or 0.0), n))
    owners = [OwnerDigest(n, now[n], sorted(causes[n].items(), key=lambda kv: (-kv[1], kv[0])), then.get(n),
                          _rollouts_of(n, ranked, rollouts)) for n in ranked]
    return Digest(window_s, summary, before, owners, consolidate(current),
                  sorted(rollouts, key=lambda r: (r.judged_at, r.owner)))


NOBODY = Owner().text
