"""Lossless JSON form of a Snapshot: ``snapshot_to_dict`` / ``snapshot_from_dict`` and NDJSON helpers.

The JSON has the top-level keys ``time, host, gpus, processes, sources`` plus ``seq, origin, schema``.
Reading is strict about the schema version and tolerant of unknown keys (a newer writer may add fields).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, TypeVar

from gpuwatch.model.snapshot import (
    SCHEMA_VERSION,
    GpuSample,
    HostSample,
    ProcessSample,
    Profiling,
    Snapshot,
    SourceStatus,
)

T = TypeVar("T")


class SnapshotFormatError(ValueError):
    """A document that is not a Snapshot this version of gpuwatch can read."""


def _plain(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, float) and value != value:  # NaN is not JSON: a missing value is None
            value = None
        out[f.name] = value
    return out


def gpu_to_dict(gpu: GpuSample) -> dict[str, Any]:
    d = _plain(gpu)
    d["profiling"] = {name: _plain(p) for name, p in gpu.profiling.items()}
    d["extra"] = dict(gpu.extra)
    d["labels"] = dict(gpu.labels)
    return d


def snapshot_to_dict(snap: Snapshot) -> dict[str, Any]:
    """A JSON-ready dict; ``snapshot_from_dict`` turns it back into an equal Snapshot."""
    return {
        "schema": snap.schema,
        "time": snap.time,
        "seq": snap.seq,
        "origin": snap.origin,
        "host": _plain(snap.host),
        "gpus": [gpu_to_dict(g) for g in snap.gpus],
        "processes": [_plain(p) for p in snap.processes],
        "sources": [_plain(s) for s in snap.sources],
    }


def _build(cls: type[T], data: Mapping[str, Any], where: str) -> T:
    if not isinstance(data, Mapping):
        raise SnapshotFormatError(f"{where}: expected an object, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in names}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise SnapshotFormatError(f"{where}: {exc}") from None


def _gpu_from_dict(data: Mapping[str, Any], where: str) -> GpuSample:
    prof = {name: _build(Profiling, p, f"{where}.profiling.{name}") for name, p in
            (data.get("profiling") or {}).items()}
    rest = {k: v for k, v in data.items() if k not in ("profiling", "extra", "labels")}
    gpu = _build(GpuSample, rest, where)
    return dataclasses.replace(gpu, profiling=prof, extra=dict(data.get("extra") or {}),
                               labels=dict(data.get("labels") or {}))


def snapshot_from_dict(data: Mapping[str, Any]) -> Snapshot:
    """Rebuild a Snapshot; raises SnapshotFormatError naming the bad part."""
    if not isinstance(data, Mapping):
        raise SnapshotFormatError("a snapshot must be a JSON object")
    schema = data.get("schema", SCHEMA_VERSION)
    if schema != SCHEMA_VERSION:
        raise SnapshotFormatError(f"snapshot schema {schema} is not supported (this gpuwatch reads {SCHEMA_VERSION})")
    for key in ("time", "host"):
        if key not in data:
            raise SnapshotFormatError(f"snapshot has no '{key}'")
    return Snapshot(
        time=float(data["time"]),
        seq=int(data.get("seq", 0)),
        origin=str(data.get("origin", "live")),
        host=_build(HostSample, data["host"], "host"),
        gpus=tuple(_gpu_from_dict(g, f"gpus[{i}]") for i, g in enumerate(data.get("gpus", []))),
        processes=tuple(_build(ProcessSample, p, f"processes[{i}]") for i, p in enumerate(data.get("processes", []))),
        sources=tuple(_build(SourceStatus, s, f"sources[{i}]") for i, s in enumerate(data.get("sources", []))),
    )


def dumps(snap: Snapshot, *, indent: int | None = None) -> str:
    """One Snapshot as JSON (a single line unless ``indent`` is given)."""
    return json.dumps(snapshot_to_dict(snap), indent=indent, separators=None if indent else (",", ":"),
                      allow_nan=False, default=_reject)


def loads(text: str | bytes) -> Snapshot:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotFormatError(f"not JSON: {exc}") from None
    return snapshot_from_dict(data)


def _reject(obj: object) -> Any:
    raise TypeError(f"cannot serialise {type(obj).__name__} in a snapshot")
