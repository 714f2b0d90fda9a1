"""Hostile data that is well-formed: names that are not UTF-8, recordings whose numbers or rows cannot be one
machine's truth, time that does not move forward, a looping replay asked for a moment years away, and peers
that answer without end.

Two sets. :data:`REFUSED_RECORDINGS` must end in one clear error like the rest of the corpus (``cases.py``
adds them to its generated recordings). :data:`SERVED` are inputs a command must take and serve (exit 0, no
traceback, bounded time and memory), showing what it could not decode visibly: they are run by
``tests/test_corpus_data.py``, with :data:`PEERS` (endless peers, each a clean one-line error)."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass

T0 = 1764666000.0
HEADER = {"gpuwatch_recording": 1, "created": T0, "interval_s": 1.0, "hostname": "h", "description": "", "meta": {}}
GPU = {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H200", "gpu_util": 50.0, "mem_util": 10.0,
       "mem_used_bytes": 1 << 30, "mem_total_bytes": 1 << 34,
       "profiling": {"gpm": {"sm_active": 40.0, "sm_occupancy": 20.0, "tensor_active": 5.0, "dram_active": 9.0}}}
PROCESS = {"pid": 4242, "gpu_index": 0, "gpu_memory_bytes": 1 << 30, "sm_util": 40.0, "mem_util": 5.0,
           "user": "svc", "name": "python3", "cmdline": "python3 serve.py", "cpu_percent": 99.0,
           "top_thread_cpu_percent": 98.0, "thread_cpu_percents": [98.0, 3.0], "run_wait_percent": 1.0,
           "workers_cpu_percent": 0.0}
HOST = {"hostname": "h", "cpu_count": 4, "cpu_percent": 30.0, "iowait_percent": 0.0}
#: The byte 0xE9 (Latin-1 é) as Python reads it from /proc or finds it in JSON: a lone surrogate.
BAD = "caf\udce9"


def snap(t: float, *, gpu: dict[str, object] | None = None, process: dict[str, object] | None = None,
         host: dict[str, object] | None = None, **top: object) -> dict[str, object]:
    return {"schema": 1, "time": t, "seq": 1, "origin": "live", "host": {**HOST, **(host or {})},
            "gpus": [{**GPU, **(gpu or {})}], "processes": [{**PROCESS, **(process or {})}], "sources": [], **top}


def recording(*snapshots: dict[str, object], header: dict[str, object] | None = None) -> bytes:
    lines = [json.dumps({**HEADER, **(header or {})})] + [json.dumps(s) for s in snapshots]
    return gzip.compress(("\n".join(lines) + "\n").encode())


def _steady(n: int, **changes: object) -> bytes:
    return recording(*(snap(T0 + i, **changes) for i in range(n)))  # type: ignore[arg-type]


def _negative(part: str, field: str, value: object = -5.0) -> Callable[[], bytes]:
    def make() -> bytes:
        first = copy.deepcopy(snap(T0))  # the templates' nested dicts are shared: never write into them
        target: dict[str, object]
        if part == "profiling":
            target = first["gpus"][0]["profiling"]["gpm"]  # type: ignore[index]
        else:
            target = first[part][0] if part in ("gpus", "processes") else first[part]  # type: ignore[index]
        target[field] = value
        return recording(first, snap(T0 + 1))
    return make


def _twice(part: str, late: bool = False, **changes: object) -> Callable[[], bytes]:
    def make() -> bytes:
        row = GPU if part == "gpus" else PROCESS
        bad = snap(T0 + (40 if late else 0), **{part: [row, {**row, **changes}]})  # type: ignore[arg-type]
        good = [snap(T0 + i) for i in range(40)] if late else []
        return recording(*good, bad)
    return make


#: Recordings no command may accept (name -> bytes): each is refused with file:line.
REFUSED_RECORDINGS: dict[str, Callable[[], bytes]] = {
    **{f"negative-{part}-{field.replace('_', '-')}.ndjson.gz": _negative(part, field) for part, field in (
        ("gpus", "gpu_util"), ("gpus", "mem_util"), ("profiling", "sm_active"), ("profiling", "sm_occupancy"),
        ("profiling", "tensor_active"), ("profiling", "dram_active"), ("processes", "sm_util"),
        ("processes", "mem_util"), ("processes", "cpu_percent"), ("processes", "top_thread_cpu_percent"),
        ("processes", "run_wait_percent"), ("processes", "workers_cpu_percent"), ("host", "cpu_percent"),
        ("host", "iowait_percent"))},
    "negative-thread-cpu-percents.ndjson.gz": _negative("processes", "thread_cpu_percents", [50.0, -0.5]),
    "negative-gpu-util-tiny.ndjson.gz": _negative("gpus", "gpu_util", -1e-9),
    "negative-gpu-util-integer.ndjson.gz": _negative("gpus", "gpu_util", -1),
    "negative-gpu-util-huge.ndjson.gz": _negative("gpus", "gpu_util", -1e17),
    "gpu-twice.ndjson.gz": _twice("gpus"),
    "gpu-twice-other-uuid.ndjson.gz": _twice("gpus", uuid="GPU-1"),
    "gpu-twice-late.ndjson.gz": _twice("gpus", late=True),
    "process-twice.ndjson.gz": _twice("processes"),
    "process-twice-other-name.ndjson.gz": _twice("processes", name="other"),
    "process-twice-late.ndjson.gz": _twice("processes", late=True),
}


@dataclass(frozen=True)
class Served:
    """A recording a command must take: ``shows`` must appear in what the commands print (stdout)."""

    make: Callable[[], bytes]
    shows: str = ""
    #: A line the commands must log (once) on standard error.
    says: str = ""


def _named(field: str, where: str = "process") -> Served:
    key = {"process": "process", "gpu": "gpu", "host": "host"}[where]
    return Served(lambda: _steady(30, **{key: {field: BAD}}), shows="caf\\xe9")


SERVED: dict[str, Served] = {
    **{f"latin1-process-{f.replace('_', '-')}.ndjson.gz": _named(f) for f in (
        "name", "cmdline", "user", "container_id", "wait_channel", "state", "namespace", "pod", "container")},
    **{f"latin1-gpu-{f.replace('_', '-')}.ndjson.gz": _named(f, "gpu") for f in (
        "name", "uuid", "pci_bus_id", "driver_version")},
    "latin1-hostname.ndjson.gz": _named("hostname", "host"),
    "latin1-gpu-labels.ndjson.gz": Served(lambda: _steady(30, gpu={"labels": {"pod": BAD, BAD: "x"}}),
                                         shows="caf\\xe9"),
    "latin1-clock-events.ndjson.gz": Served(lambda: _steady(30, gpu={"clock_events": [BAD]}), shows="caf\\xe9"),
    "latin1-thread-waits.ndjson.gz": Served(lambda: _steady(30, process={"thread_waits": [BAD]})),
    "latin1-source-message.ndjson.gz": Served(lambda: _steady(30, sources=[{"name": "nvml", "state": "error",
                                                                           "message": BAD}])),
    "latin1-header-hostname.ndjson.gz": Served(lambda: recording(*(snap(T0 + i) for i in range(30)),
                                                                header={"hostname": BAD, "description": BAD})),
    "high-surrogate-name.ndjson.gz": Served(lambda: _steady(30, process={"name": "x\ud800y"}), shows="x\\ud800y"),
    "surrogate-pair-halves.ndjson.gz": Served(lambda: _steady(30, process={"name": "\udce9\udcff\ud83d"})),
    "latin1-every-name.ndjson.gz": Served(lambda: _steady(30, process={"name": BAD, "cmdline": BAD, "user": BAD},
                                                          gpu={"name": BAD, "labels": {BAD: BAD}}),
                                          shows="caf\\xe9"),
    "clock-stuck.ndjson.gz": Served(lambda: recording(*(snap(T0) for _ in range(60))),
                                    says="is not after the one before"),
    "clock-backwards-once.ndjson.gz": Served(lambda: recording(*(snap(T0 + i - (30 if i >= 30 else 0))
                                                                 for i in range(60))),
                                             says="is not after the one before"),
    "clock-alternating.ndjson.gz": Served(lambda: recording(*(snap(T0 + (i % 2)) for i in range(60))),
                                          says="is not after the one before"),
    "clock-stuck-then-moving.ndjson.gz": Served(lambda: recording(*(snap(T0 + max(0, i - 30)) for i in range(60))),
                                                says="is not after the one before"),
}

#: Commands that read a SERVED recording ({r}: the recording, {d}: a scratch directory).
SERVED_COMMANDS: dict[str, tuple[str, ...]] = {
    "snapshot": ("snapshot", "--json", "--replay", "{r}"),
    "snapshot-table": ("snapshot", "--replay", "{r}"),
    "doctor": ("doctor", "--json", "--replay", "{r}"),
    "rules-test": ("rules", "test", "--replay", "{r}"),
    "report": ("report", "--json", "--replay", "{r}"),
    "record": ("record", "--replay", "{r}", "-o", "{d}/out.ndjson.gz"),
}

#: A looping replay asked for a moment far past its end: must answer at once, modulo its period.
LOOP_AT = ("1e9", "1e12", "31536000", "86399.5", "3600")

#: Peers that answer 200 and never stop (served by tests/endless.py): the command must cut the read and say so.
PEERS: dict[str, tuple[bool, tuple[str, ...]]] = {
    "report-connect-endless-json": (True, ("report", "--connect", "{url}")),
    "report-connect-endless-line": (False, ("report", "--connect", "{url}")),
    "report-connect-endless-json-csv": (True, ("report", "--connect", "{url}", "--csv")),
}
