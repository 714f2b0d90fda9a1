"""What an alert can be about, found in one Snapshot: GPUs, processes, the host and sources, each with a
key that stays the same from snapshot to snapshot and the labels the exporter puts on its series.

Keys: a GPU by UUID (indexes can change on reboot, UUIDs cannot); a process by (pid, GPU index) because
a process on two GPUs has one series per GPU; the host; a source by name. A compound rule joins a
process to its GPU and anything to the host through :meth:`Frame.project`.
"""

from __future__ import annotations

from gpuwatch.alerts.rules import Scope
from gpuwatch.model.process_sample import PROCESS_LABELS, ProcessSample
from gpuwatch.model.snapshot import GPU_LABELS, GpuSample, HostSample, Snapshot, SourceStatus

Key = tuple[str, ...]
HOST_KEY: Key = ("host",)
Subject = GpuSample | ProcessSample | HostSample | SourceStatus


#: The labels an alert about each kind of entity carries (besides ``alertname`` and the rule's labels).
SCOPE_LABELS: dict[str, tuple[str, ...]] = {
    "gpu": GPU_LABELS, "process": PROCESS_LABELS, "host": ("hostname",), "source": ("source",)}


class Frame:
    """One Snapshot seen as entities, at engine time ``now`` (which differs from ``snapshot.time`` only
    after the clock jumped backwards)."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        self.snapshot = snapshot
        self.now = now
        self._subjects: dict[Key, Subject] = {HOST_KEY: snapshot.host}
        self._by_scope: dict[str, list[Key]] = {"host": [HOST_KEY], "gpu": [], "process": [], "source": []}
        self._gpu_of_index: dict[int, Key] = {}
        for g in snapshot.gpus:
            key = ("gpu", g.uuid)
            self._add("gpu", key, g)
            self._gpu_of_index.setdefault(g.index, key)
        for p in snapshot.processes:
            self._add("process", ("process", str(p.pid), str(p.gpu_index)), p)
        for s in snapshot.sources:
            self._add("source", ("source", s.name), s)

    def _add(self, scope: str, key: Key, subject: Subject) -> None:
        if key in self._subjects:
            return  # a duplicate entry in a malformed snapshot: the first one wins
        self._subjects[key] = subject
        self._by_scope[scope].append(key)

    def keys(self, scope: Scope) -> list[Key]:
        return self._by_scope[scope]

    def subject(self, key: Key) -> Subject:
        return self._subjects[key]

    def labels(self, key: Key) -> dict[str, str]:
        """:data:`SCOPE_LABELS` of the entity, with its values (made only for entities an alert is about)."""
        subject, hostname = self._subjects[key], self.snapshot.host.hostname
        if isinstance(subject, SourceStatus):
            return {"source": subject.name}
        if isinstance(subject, HostSample):
            return {"hostname": hostname}
        pod = {k: v for k, v in subject.pod_labels().items() if v}  # on Kubernetes: whose pod it is
        return {**subject.identity_labels(hostname), **pod}

    def has(self, key: Key) -> bool:
        return key in self._subjects

    def project(self, key: Key, scope: Scope) -> Key | None:
        """The entity of ``scope`` that ``key`` belongs to: a process's GPU, anything's host."""
        kind = key[0]
        if kind == scope:
            return key
        if scope == "host":
            return HOST_KEY
        if scope == "gpu" and kind == "process":
            return self._gpu_of_index.get(int(key[2]))
        return None
