"""The bad-input corpus: config files, rule files, recordings and dcgm-exporter pages that are each wrong in
one way. Small cases live as files under ``config/``, ``rules/``, ``recordings/`` and ``dcgm/``; big or
binary ones (nesting 100 000 deep, a 2 MiB file, a gzip bomb) are generated here so the repository stays
small. Every case must end in one clear error: non-zero exit, no traceback, bounded time and memory."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).parent
KINDS = ("config", "rules", "recordings", "dcgm")

HEADER = {"gpuwatch_recording": 1, "created": 1764666000.0, "interval_s": 1.0, "hostname": "h", "description": "",
          "meta": {}}
SNAPSHOT = {"schema": 1, "time": 1764666000.0, "seq": 1, "origin": "live", "host": {"hostname": "h"},
            "gpus": [{"index": 0, "uuid": "GPU-0", "gpu_util": 50.0}], "processes": [], "sources": []}


def _recording(*lines: object, raw_tail: bytes = b"") -> bytes:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    return gzip.compress(text.encode() + raw_tail)


def _snap(**changes: object) -> dict[str, object]:
    return {**SNAPSHOT, **changes}


def _gpu(**changes: object) -> dict[str, object]:
    return _snap(gpus=[{"index": 0, "uuid": "GPU-0", **changes}])


def _billion_laughs() -> bytes:
    """1 KiB of YAML whose last alias stands for 9^9 strings, where an error message would quote it."""
    lines = ["groups:", "- name: g", '  x0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"  x{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    lines += ["  rules:", "  - alert: *a9", "    condition: {threshold: {metric: gpu.util, op: '<', value: 1}}"]
    return ("\n".join(lines) + "\n").encode()


#: name -> bytes, per kind: the generated cases.
GENERATED: dict[str, dict[str, Callable[[], bytes]]] = {
    "config": {
        "deep-array.toml": lambda: ("x = " + "[" * 100_000 + "]" * 100_000 + "\n").encode(),
        "deep-inline-table.toml": lambda: ("x = " + "{a=" * 5_000 + "1" + "}" * 5_000 + "\n").encode(),
        "two-megabytes.toml": lambda: b"# padding\n" * 210_000,
        "huge-listen-string.toml": lambda: b'[daemon]\nlisten = "' + b"a" * 1_000_000 + b'"\n',
        "huge-integer.toml": lambda: b"[daemon]\nmax_process_series = " + b"9" * 4_000 + b"\n",
    },
    "rules": {
        "billion-laughs.yml": _billion_laughs,
        "deep-list.yml": lambda: ("groups: " + "[" * 50_000 + "]" * 50_000 + "\n").encode(),
        "deep-condition.yml": lambda: (
            "groups:\n- name: g\n  rules:\n  - alert: Deep\n    condition: "
            + "{all: [" * 2_000 + "{threshold: {metric: gpu.util, op: '<', value: 1}}" + "]}" * 2_000 + "\n"
        ).encode(),
        "unclosed-braces.yml": lambda: (
            "groups:\n- name: g\n  rules:\n  - alert: Braces\n    condition: {threshold: {metric: gpu.util, "
            "op: '<', value: 1}}\n    annotations:\n      summary: '" + "{{" * 16_000 + "'\n").encode(),
        "long-annotation.yml": lambda: (
            "groups:\n- name: g\n  rules:\n  - alert: Long\n    condition: {threshold: {metric: gpu.util, "
            "op: '<', value: 1}}\n    annotations:\n      summary: '" + "x" * 200_000 + "'\n").encode(),
        "two-megabytes.yml": lambda: b"# padding\n" * 210_000,
        "huge-alert-name.yml": lambda: (
            "groups:\n- name: g\n  rules:\n  - alert: " + "A" * 200_000 + "-\n    condition: x\n").encode(),
    },
    "recordings": {
        "not-gzip.ndjson.gz": lambda: b"\x00\x01garbage" * 100,
        "empty.ndjson.gz": lambda: b"",
        "no-header.ndjson.gz": lambda: _recording(SNAPSHOT),
        "header-version-99.ndjson.gz": lambda: _recording({**HEADER, "gpuwatch_recording": 99}, SNAPSHOT),
        "header-created-list.ndjson.gz": lambda: _recording({**HEADER, "created": [1]}, SNAPSHOT),
        "header-interval-nan.ndjson.gz": lambda: _recording(json.dumps(HEADER).replace("1.0,", "NaN,", 1),
                                                           SNAPSHOT),
        "header-interval-zero.ndjson.gz": lambda: _recording({**HEADER, "interval_s": 0}, SNAPSHOT),
        "header-meta-string.ndjson.gz": lambda: _recording({**HEADER, "meta": "m"}, SNAPSHOT),
        "header-is-array.ndjson.gz": lambda: _recording([HEADER], SNAPSHOT),
        "bad-line-after-header.ndjson.gz": lambda: _recording(HEADER, SNAPSHOT, "{not json", SNAPSHOT),
        "time-nan.ndjson.gz": lambda: _recording(HEADER, json.dumps(_snap(time=0.5)).replace("0.5", "NaN")),
        "time-string.ndjson.gz": lambda: _recording(HEADER, _snap(time="noon")),
        "time-missing.ndjson.gz": lambda: _recording(HEADER, {k: v for k, v in SNAPSHOT.items() if k != "time"}),
        "host-missing.ndjson.gz": lambda: _recording(HEADER, {k: v for k, v in SNAPSHOT.items() if k != "host"}),
        "schema-99.ndjson.gz": lambda: _recording(HEADER, _snap(schema=99)),
        "gpu-util-string.ndjson.gz": lambda: _recording(HEADER, _gpu(gpu_util="busy")),
        "gpu-index-float.ndjson.gz": lambda: _recording(HEADER, _gpu(index=0.5)),
        "gpu-uuid-number.ndjson.gz": lambda: _recording(HEADER, _gpu(uuid=7)),
        "gpu-memory-list.ndjson.gz": lambda: _recording(HEADER, _gpu(mem_used_bytes=[1])),
        "gpu-labels-list.ndjson.gz": lambda: _recording(HEADER, _gpu(labels=["a"])),
        "gpu-extra-strings.ndjson.gz": lambda: _recording(HEADER, _gpu(extra={"x": "y"})),
        "gpu-profiling-list.ndjson.gz": lambda: _recording(HEADER, _gpu(profiling=[1])),
        "gpu-clock-events-number.ndjson.gz": lambda: _recording(HEADER, _gpu(clock_events=3)),
        "gpus-object.ndjson.gz": lambda: _recording(HEADER, _snap(gpus={"0": {}})),
        "gpu-is-string.ndjson.gz": lambda: _recording(HEADER, _snap(gpus=["GPU-0"])),
        "process-pid-string.ndjson.gz": lambda: _recording(
            HEADER, _snap(processes=[{"pid": "one", "gpu_index": 0}])),
        "source-state-number.ndjson.gz": lambda: _recording(HEADER, _snap(sources=[{"name": "n", "state": 3}])),
        "host-cpu-list-strings.ndjson.gz": lambda: _recording(
            HEADER, _snap(host={"hostname": "h", "per_cpu_percent": ["a"]})),
        "deep-json-line.ndjson.gz": lambda: _recording(HEADER, "[" * 100_000 + "]" * 100_000),
        "huge-line.ndjson.gz": lambda: gzip.compress(json.dumps(HEADER).encode() + b"\n" + b" " * (40 << 20)
                                                     + b"\n"),
        "snapshot-is-number.ndjson.gz": lambda: _recording(HEADER, 5),
        "invalid-utf8.ndjson.gz": lambda: _recording(HEADER, raw_tail=b'{"time": "\xff\xfe"}\n'),
    },
    "dcgm": {
        "ten-thousand-gpus.prom": lambda: "".join(
            f'DCGM_FI_DEV_GPU_TEMP{{gpu="{i}",UUID="GPU-{i}"}} 40\n' for i in range(10_000)).encode(),
        "binary.prom": lambda: bytes(range(256)) * 40,
        "empty.prom": lambda: b"",
    },
}


def cases() -> list[tuple[str, str]]:
    """(kind, name) of every case, the files on disk and the generated ones."""
    out = []
    for kind in KINDS:
        names = {p.name for p in (HERE / kind).glob("*") if p.is_file()} | set(GENERATED[kind])
        out += [(kind, name) for name in sorted(names)]
    return out


def materialise(kind: str, name: str, directory: Path) -> Path:
    """The case as a file: the checked-in one, or the generated one written under ``directory``."""
    if name in GENERATED[kind]:
        path = directory / kind / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(GENERATED[kind][name]())
        return path
    return HERE / kind / name
