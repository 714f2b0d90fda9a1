"""The accounting's rows, named once and kept from the ledger to SQLite, the API, ``/metrics`` and the report.

An :class:`Increment` of the ledger, a row of the store, a row of ``GET /api/v1/efficiency`` and what the
report adds up are the same named tuples: ``row.states.allocated``, never ``values[1]``. Who an owner is,
and the one rule for how many are named before the rest add up under ``(other)`` (:class:`OwnerCap`), are
here. The rule runs over two spans: each hour in the ledger (so the hourly roll-ups stay bounded and a new
hour names new owners) and the daemon's life on /metrics (a counter keeps every series it ever served);
within the first ``MAX_OWNERS`` owners both name the same ones.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpuwatch.model.causes import OWNER_LABELS, STATES

#: Owners one accounting names before the rest add up under :data:`OTHER_OWNER`: the default of
#: ``[daemon] max_process_series``, the cap of the process series on /metrics (a daemon passes its own).
MAX_OWNERS = 256


class Owner(NamedTuple):
    """Who lost the time: the Kubernetes pod where the kubelet knows it, else the process's user and command."""

    namespace: str = ""
    pod: str = ""
    container: str = ""
    user: str = ""
    command: str = ""

    @property
    def text(self) -> str:
        """How a report names it: ``namespace/pod/container``, ``user:command``, or ``-`` for nobody."""
        if self.pod:
            return "/".join(x for x in (self.namespace, self.pod, self.container) if x)
        if self.user or self.command:
            return f"{self.user or '?'}:{self.command or '?'}"
        return "-"


NO_OWNER = Owner()
OTHER_OWNER = Owner(command="(other)")


class OwnerCap:
    """The first ``limit`` owners are named; every later one is :data:`OTHER_OWNER` (nothing is dropped)."""

    def __init__(self, limit: int = MAX_OWNERS) -> None:
        self.limit = limit
        self._named: set[Owner] = set()

    def __call__(self, owner: Owner) -> Owner:
        if owner in self._named or owner == OTHER_OWNER:
            return owner
        if len(self._named) >= self.limit:
            return OTHER_OWNER
        self._named.add(owner)
        return owner


class States(NamedTuple):
    """GPU-seconds by state, each a part of the one before (:data:`gpuwatch.model.causes.STATES`)."""

    observed: float = 0.0
    allocated: float = 0.0
    busy: float = 0.0
    effective: float = 0.0

    def plus(self, other: States) -> States:
        return States(*(a + b for a, b in zip(self, other, strict=True)))


class GpuHour(NamedTuple):
    hour: int
    gpu: int


class SecondsRow(NamedTuple):
    """GPU-seconds of one GPU in one hour."""

    key: GpuHour
    states: States

    def to_dict(self) -> dict[str, Any]:
        return {**self.key._asdict(), **self.states._asdict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SecondsRow:
        return cls(GpuHour(int(d["hour"]), int(d["gpu"])), States(*(float(d[s]) for s in STATES)))


class LostKey(NamedTuple):
    """Where lost seconds go: an hour, a GPU, a cause and an owner."""

    hour: int
    gpu: int
    cause: str
    owner: Owner


class LostRow(NamedTuple):
    key: LostKey
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        k = self.key
        return {"hour": k.hour, "gpu": k.gpu, "cause": k.cause, **k.owner._asdict(), "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LostRow:
        owner = Owner(*(str(d[o]) for o in OWNER_LABELS))
        return cls(LostKey(int(d["hour"]), int(d["gpu"]), str(d["cause"]), owner), float(d["seconds"]))


class HistKey(NamedTuple):
    """A bin of a GPU's SM activity in one hour."""

    hour: int
    gpu: int
    bin: int


class HistRow(NamedTuple):
    key: HistKey
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {**self.key._asdict(), "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HistRow:
        return cls(HistKey(int(d["hour"]), int(d["gpu"]), int(d["bin"])), float(d["seconds"]))


class OwnerKey(NamedTuple):
    """An owner's use of a GPU in one hour (who held it: the process the doctor named, else the biggest
    memory holder, as the lost seconds name it)."""

    hour: int
    gpu: int
    owner: Owner


class OwnerUse(NamedTuple):
    """How an owner used a GPU in one hour: what consolidation advice stands on. ``peak_sm`` is the highest
    10-second mean of SM activity (percent), ``peak_mem`` the most GPU memory in use (bytes), ``mem_total``
    the GPU's memory; ``underused`` the allocated seconds of 10-second blocks under
    :data:`UNDERUSED_PCT` SM activity."""

    allocated: float = 0.0
    effective: float = 0.0
    underused: float = 0.0
    peak_sm: float = 0.0
    peak_mem: float = 0.0
    mem_total: float = 0.0

    def plus(self, other: OwnerUse) -> OwnerUse:
        """Seconds add up; peaks and the GPU's memory take the larger."""
        return OwnerUse(self.allocated + other.allocated, self.effective + other.effective,
                        self.underused + other.underused, max(self.peak_sm, other.peak_sm),
                        max(self.peak_mem, other.peak_mem), max(self.mem_total, other.mem_total))


#: A 10-second block under this SM activity (percent) is under-used: half the healthy band's floor (70 %),
#: so such a GPU could take a second workload of the same size and still sit below the band.
UNDERUSED_PCT = 35.0


class OwnerRow(NamedTuple):
    key: OwnerKey
    use: OwnerUse

    def to_dict(self) -> dict[str, Any]:
        k = self.key
        return {"hour": k.hour, "gpu": k.gpu, **k.owner._asdict(), **self.use._asdict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OwnerRow:
        owner = Owner(*(str(d[o]) for o in OWNER_LABELS))
        return cls(OwnerKey(int(d["hour"]), int(d["gpu"]), owner),
                   OwnerUse(*(float(d[f]) for f in OwnerUse._fields)))
