"""Lossless JSON form of a Snapshot: ``snapshot_to_dict`` / ``snapshot_from_dict`` and NDJSON helpers.

The JSON has the top-level keys ``time, host, gpus, processes, sources`` plus ``seq, origin, schema``, and
``stacks`` and ``feeders`` (the doctor's evidence; absent in older recordings, read as empty).
Reading is strict about the schema version and tolerant of unknown keys (a newer writer may add fields).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gpuwatch.model import text
from gpuwatch.model.errors import InputError
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.health import GpuHealth
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import SCHEMA_VERSION, GpuSample, HostSample, Profiling, Snapshot, SourceStatus
from gpuwatch.model.stacks import Frame, StackSample, ThreadStack

T = TypeVar("T")

#: No reading gpuwatch keeps comes near this (bytes of memory are ~1e12, energy in joules ~1e10); a value past
#: it is damage, and letting 1e308 through turns into inf, then OverflowError, deep in a consumer.
MAX_MAGNITUDE = 1e18
#: Snapshot times are Unix seconds; past the year 9999 no date can be formatted.
MAX_TIME = 253_402_300_799.0
#: GPUs one Snapshot may hold (the DCGM page reader's cap); more is not one machine, and would make every
#: /metrics scrape and every evaluation pay for all of them. The rest are dropped and said so.
MAX_GPUS = 256
#: Processes one Snapshot may hold (a machine with 8 GPUs has a few hundred at most); the rest are dropped.
MAX_PROCESSES = 8192
#: Stack samples, distinct stacks per sample, frames per stack, and feeders one Snapshot may hold: a stack
#: source emits a few per tick (64 innermost frames, 256 stacks); more is damage, and a hostile recording
#: must not build a huge object from a small line.
MAX_STACK_SAMPLES = 256
MAX_THREAD_STACKS = 512
MAX_FRAMES = 256
MAX_FEEDERS = 1024
MAX_THREAD_WAITS = 64
#: The SourceStatus a capped Snapshot carries, naming what was dropped.
CAP_SOURCE = "snapshot-cap"


class SnapshotFormatError(InputError):
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
    d["health"] = None if gpu.health is None else _plain(gpu.health)
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
        "stacks": [_stack_to_dict(s) for s in snap.stacks],
        "feeders": [_plain(f) for f in snap.feeders],
    }


def _stack_to_dict(sample: StackSample) -> dict[str, Any]:
    d = _plain(sample)
    d["stacks"] = [{**_plain(t), "frames": [_frame_to_dict(f) for f in t.frames]} for t in sample.stacks]
    return d


def _frame_to_dict(frame: Frame) -> dict[str, Any]:
    """A frame without the fields at their defaults (thousands of frames a window: the recording stays small;
    reading restores the defaults, so the round trip is exact)."""
    return {k: v for k, v in _plain(frame).items() if k == "function" or not (v is None or v is False or v == "")}


def _checked(value: Any, kind: str, where: str) -> Any:
    """``value`` as the field's declared type (``float | None``, ``tuple[str, ...]`` ...), or
    SnapshotFormatError: a wrong-typed field must fail here, not in every consumer later."""
    optional = kind.endswith(" | None")
    base = kind.removesuffix(" | None")
    if value is None:
        if optional:
            return None
        raise SnapshotFormatError(f"{where}: missing (null)")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if base == "float":
        if not number:
            raise SnapshotFormatError(f"{where}: expected a number, got {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):  # NaN/Infinity are not JSON; as in the
            if optional:  # writer, a missing value
                return None
            raise SnapshotFormatError(f"{where}: expected a finite number, got {value}")
        if not -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE:  # also a 5 000-digit int, before float() overflows
            raise SnapshotFormatError(f"{where}: {_short(value)} is out of range (at most {MAX_MAGNITUDE:g})")
        if value < 0 and _is_percent(where):  # no reading is below 0 %: damage, refused with its place
            raise SnapshotFormatError(f"{where}: {_short(value)} is a negative percentage")
        return float(value)
    if base == "int":
        if number and not -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE:
            raise SnapshotFormatError(f"{where}: {_short(value)} is out of range (at most {MAX_MAGNITUDE:g})")
        if number and isinstance(value, float) and value.is_integer():
            return int(value)
        if not number or not isinstance(value, int):
            raise SnapshotFormatError(f"{where}: expected a whole number, got {type(value).__name__}")
        return value
    if base in ("str", "SourceState") and not isinstance(value, str):
        raise SnapshotFormatError(f"{where}: expected a string, got {type(value).__name__}")
    if base == "str":  # JSON may carry a lone surrogate ("\udce9"): made visible, as a live name is
        return text.clean(value)
    if base == "bool" and not isinstance(value, bool):
        raise SnapshotFormatError(f"{where}: expected true or false, got {type(value).__name__}")
    if base.startswith("tuple["):
        if not isinstance(value, (list, tuple)):
            raise SnapshotFormatError(f"{where}: expected a list, got {type(value).__name__}")
        item = base[len("tuple["):].split(",", 1)[0]
        return tuple(_checked(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    return value


def _is_percent(where: str) -> bool:
    """Whether the field at ``where`` (``gpus[0].gpu_util``, ``processes[0].thread_cpu_percents[3]``) is
    a percentage."""
    name = where.rsplit(".", 1)[-1].split("[", 1)[0]
    return name.endswith(("util", "_percent", "_percents", "_active", "occupancy"))


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, float) else str(value) if abs(value) < 10**40 else "a huge number"
    return text[:40]


def _build(cls: type[T], data: Mapping[str, Any], where: str) -> T:
    if not isinstance(data, Mapping):
        raise SnapshotFormatError(f"{where}: expected an object, got {type(data).__name__}")
    kinds = _kinds(cls)  # type: ignore[arg-type]
    kwargs = {k: _checked(v, kinds[k], f"{where}.{k}") for k, v in data.items() if k in kinds}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise SnapshotFormatError(f"{where}: {exc}") from None


@functools.cache
def _kinds(cls: type) -> dict[str, str]:
    """Field name -> declared type as written (``from __future__ import annotations`` keeps it a string);
    mappings and nested records are checked by their own builders."""
    return {f.name: str(f.type) for f in dataclasses.fields(cls)
            if f.name not in ("profiling", "extra", "labels", "health")}


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SnapshotFormatError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _gpu_from_dict(data: Mapping[str, Any], where: str) -> GpuSample:
    if not isinstance(data, Mapping):
        raise SnapshotFormatError(f"{where}: expected an object, got {type(data).__name__}")
    prof = {text.clean(str(name)): _build(Profiling, p, f"{where}.profiling.{name}") for name, p in
            _mapping(data.get("profiling"), f"{where}.profiling").items()}
    extra = {text.clean(str(k)): _checked(v, "float | None", f"{where}.extra.{k}")
             for k, v in _mapping(data.get("extra"), f"{where}.extra").items()}
    labels = {text.clean(str(k)): _checked(v, "str", f"{where}.labels.{k}")
              for k, v in _mapping(data.get("labels"), f"{where}.labels").items()}
    raw_health = data.get("health")  # absent in recordings made before gpuwatch read health fields
    health = None if raw_health is None else _build(GpuHealth, raw_health, f"{where}.health")
    gpu = _build(GpuSample, data, where)
    return dataclasses.replace(gpu, profiling=prof, extra=extra, labels=labels, health=health)


def _list(data: Mapping[str, Any], key: str, where: str = "") -> list[Any]:
    value = data.get(key, [])
    if value is None and where:  # a nested list written as null: empty
        return []
    if not isinstance(value, list):
        raise SnapshotFormatError(f"{where or key}: expected a list, got {type(value).__name__}")
    return value


def _stack_from_dict(data: Mapping[str, Any], where: str, cut: dict[str, int]) -> StackSample:
    """A StackSample, its thread stacks and their frames each checked as the others are; past the caps the
    rest are dropped and counted in ``cut`` (said once for the whole Snapshot)."""
    sample = _build(StackSample, {**data, "stacks": []} if isinstance(data, Mapping) else data, where)
    threads = _list(data, "stacks", f"{where}.stacks")
    cut["thread stack(s)"] = cut.get("thread stack(s)", 0) + max(0, len(threads) - MAX_THREAD_STACKS)
    built = []
    for i, t in enumerate(threads[:MAX_THREAD_STACKS]):
        at = f"{where}.stacks[{i}]"
        stack = _build(ThreadStack, {**t, "frames": []} if isinstance(t, Mapping) else t, at)
        frames = _list(t, "frames", f"{at}.frames")
        cut["frame(s)"] = cut.get("frame(s)", 0) + max(0, len(frames) - MAX_FRAMES)
        built.append(dataclasses.replace(stack, frames=tuple(
            _build(Frame, f, f"{at}.frames[{j}]") for j, f in enumerate(frames[:MAX_FRAMES]))))
    return dataclasses.replace(sample, stacks=tuple(built))


_RELATIONS = ("child", "sibling", "peer")


def _feeder_from_dict(data: Mapping[str, Any], where: str) -> FeederSample:
    feeder = _build(FeederSample, data, where)
    if feeder.relation not in _RELATIONS:
        raise SnapshotFormatError(f"{where}.relation: expected one of {', '.join(_RELATIONS)}, got "
                                  f"{str(feeder.relation)[:40]!r}")
    if len(feeder.thread_waits) > MAX_THREAD_WAITS:
        feeder = dataclasses.replace(feeder, thread_waits=feeder.thread_waits[:MAX_THREAD_WAITS])
    return feeder


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
    time = _checked(data["time"], "float", "time")
    if not 0 <= time <= MAX_TIME:
        raise SnapshotFormatError(f"time: {time!r} is not a Unix time in seconds (0 to {MAX_TIME:.0f})")
    gpus, procs = _list(data, "gpus"), _list(data, "processes")
    stacks, feeders = _list(data, "stacks"), _list(data, "feeders")
    sources = [_build(SourceStatus, s, f"sources[{i}]") for i, s in enumerate(_list(data, "sources"))]
    dropped = [f"{len(items) - cap} {what} past the first {cap}" for items, cap, what in
               ((gpus, MAX_GPUS, "GPU(s)"), (procs, MAX_PROCESSES, "process(es)"),
                (stacks, MAX_STACK_SAMPLES, "stack sample(s)"), (feeders, MAX_FEEDERS, "feeder(s)"))
               if len(items) > cap]
    gpu_samples = _unique(tuple(_gpu_from_dict(g, f"gpus[{i}]") for i, g in enumerate(gpus[:MAX_GPUS])),
                          "gpus", lambda g: f"GPU {g.index}")
    proc_samples = _unique(tuple(_build(ProcessSample, p, f"processes[{i}]") for i, p in
                                 enumerate(procs[:MAX_PROCESSES])),
                           "processes", lambda p: f"pid {p.pid} on GPU {p.gpu_index}")
    cut: dict[str, int] = {}
    stack_samples = tuple(_stack_from_dict(s, f"stacks[{i}]", cut) for i, s in enumerate(stacks[:MAX_STACK_SAMPLES]))
    dropped += [f"{n} {what} past the first {MAX_FRAMES if what == 'frame(s)' else MAX_THREAD_STACKS} of "
                f"{'a stack' if what == 'frame(s)' else 'a stack sample'}" for what, n in cut.items() if n]
    if dropped:  # read only the first ones: the rest would cost every consumer, and cannot be one machine
        sources.append(SourceStatus(CAP_SOURCE, "error", "dropped " + " and ".join(dropped)))
    return Snapshot(
        time=time,
        seq=_checked(data.get("seq", 0), "int", "seq"),
        origin=_checked(data.get("origin", "live"), "str", "origin"),
        host=_build(HostSample, data["host"], "host"),
        gpus=gpu_samples,
        processes=proc_samples,
        sources=tuple(sources),
        stacks=stack_samples,
        feeders=tuple(_feeder_from_dict(f, f"feeders[{i}]") for i, f in enumerate(feeders[:MAX_FEEDERS])),
    )


def _unique(items: tuple[T, ...], where: str, key: Callable[[T], str]) -> tuple[T, ...]:
    """``items``, or SnapshotFormatError naming the second of two with one key: a GPU index (or a process on a
    GPU) twice in one snapshot would give two /metrics series of one name and labels, and count twice."""
    seen: set[str] = set()
    for i, item in enumerate(items):
        k = key(item)
        if k in seen:
            raise SnapshotFormatError(f"{where}[{i}]: {k} is listed twice in one snapshot")
        seen.add(k)
    return items


def dropped_by_cap(snap: Snapshot) -> str | None:
    """What the caps dropped from this Snapshot when it was read (None: nothing)."""
    status = snap.source(CAP_SOURCE)
    return None if status is None else status.message


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
