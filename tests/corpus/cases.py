"""The bad-input corpus: config files, rule files, recordings and dcgm-exporter pages that are each wrong in
one way. Small cases live as files under ``config/``, ``rules/``, ``recordings/`` and ``dcgm/``; big or
binary ones (nesting 100 000 deep, a 2 MiB file, a gzip bomb) are generated here so the repository stays
small. Every case must end in one clear error: non-zero exit, no traceback, bounded time and memory."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpus.cases_data import REFUSED_RECORDINGS

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
        "receiver-url-huge-port.toml": lambda: b'[[receivers]]\nname = "ops"\nkind = "slack"\nurl = "http://h:'
        + b"9" * 5_000 + b'/"\n',
        "listen-huge-port.toml": lambda: b'[daemon]\nlisten = "127.0.0.1:' + b"9" * 5_000 + b'"\n',
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
        "thread-cpu-list-strings.ndjson.gz": lambda: _recording(
            HEADER, _snap(processes=[{"pid": 1, "gpu_index": 0, "thread_cpu_percents": ["a"]}])),
        "deep-json-line.ndjson.gz": lambda: _recording(HEADER, "[" * 100_000 + "]" * 100_000),
        "huge-line.ndjson.gz": lambda: gzip.compress(json.dumps(HEADER).encode() + b"\n" + b" " * (40 << 20)
                                                     + b"\n"),
        "snapshot-is-number.ndjson.gz": lambda: _recording(HEADER, 5),
        "invalid-utf8.ndjson.gz": lambda: _recording(HEADER, raw_tail=b'{"time": "\xff\xfe"}\n'),
        "header-version-true.ndjson.gz": lambda: _recording({**HEADER, "gpuwatch_recording": True}, SNAPSHOT),
        "header-version-float.ndjson.gz": lambda: _recording({**HEADER, "gpuwatch_recording": 1.0}, SNAPSHOT),
        "header-version-huge.ndjson.gz": lambda: _recording(
            json.dumps(HEADER).replace(": 1,", ": " + "9" * 5000 + ",", 1), SNAPSHOT),
        "header-created-1e308.ndjson.gz": lambda: _recording({**HEADER, "created": 1e308}, SNAPSHOT),
        "header-interval-1e308.ndjson.gz": lambda: _recording({**HEADER, "interval_s": 1e308}, SNAPSHOT),
        "header-created-huge-int.ndjson.gz": lambda: _recording(
            json.dumps(HEADER).replace("1764666000.0", "9" * 5000, 1), SNAPSHOT),
        "time-1e308.ndjson.gz": lambda: _recording(HEADER, SNAPSHOT, _snap(time=1e308), SNAPSHOT),
        "time-negative.ndjson.gz": lambda: _recording(HEADER, SNAPSHOT, _snap(time=-1e12)),
        "time-huge-int.ndjson.gz": lambda: _recording(
            HEADER, SNAPSHOT, json.dumps(SNAPSHOT).replace("1764666000.0", "9" * 5000, 1)),
        "gpu-util-1e308.ndjson.gz": lambda: _recording(HEADER, _gpu(gpu_util=1e308), _gpu(gpu_util=1e308)),
        "gpu-memory-1e308.ndjson.gz": lambda: _recording(HEADER, _gpu(mem_used_bytes=1e308, mem_total_bytes=1e308)),
        "gpu-index-huge.ndjson.gz": lambda: _recording(HEADER, _gpu(index=10**30)),
        "process-pid-1e300.ndjson.gz": lambda: _recording(HEADER, _snap(processes=[{"pid": 1e300, "gpu_index": 0}])),
        "seq-huge-int.ndjson.gz": lambda: _recording(HEADER, json.dumps(SNAPSHOT).replace('"seq": 1', '"seq": '
                                                                                         + "9" * 5000, 1)),
        "bad-line-late.ndjson.gz": lambda: _recording(HEADER, *[_snap(time=1764666000.0 + i) for i in range(30)],
                                                      "{oops", SNAPSHOT),
        "second-line-is-header.ndjson.gz": lambda: _recording(HEADER, HEADER, SNAPSHOT),
        "gzip-bomb-line.ndjson.gz": lambda: gzip.compress(json.dumps(HEADER).encode() + b"\n" + b"[" * (64 << 20)),
    },
    "dcgm": {
        "ten-thousand-gpus.prom": lambda: "".join(
            f'DCGM_FI_DEV_GPU_TEMP{{gpu="{i}",UUID="GPU-{i}"}} 40\n' for i in range(10_000)).encode(),
        "binary.prom": lambda: bytes(range(256)) * 40,
        "empty.prom": lambda: b"",
    },
}


GENERATED["recordings"].update(REFUSED_RECORDINGS)  # negative percentages, a GPU or process row twice


def cases() -> list[tuple[str, str]]:
    """(kind, name) of every case: the files on disk, the generated ones, the command lines and the
    misbehaving exporters (the HTTP requests are run against one daemon, apart)."""
    out = []
    for kind in KINDS:
        names = {p.name for p in (HERE / kind).glob("*") if p.is_file()} | set(GENERATED[kind])
        out += [(kind, name) for name in sorted(names)]
    out += [("commands", name) for name in sorted(RUNS)]
    out += [("dcgm-behaviours", name) for name in sorted(DCGM_BEHAVIOURS)]
    return out


def materialise(kind: str, name: str, directory: Path) -> Path:
    """The case as a file: the checked-in one, or the generated one written under ``directory``."""
    if name in GENERATED[kind]:
        path = directory / kind / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(GENERATED[kind][name]())
        return path
    return HERE / kind / name


# --- Command lines: special files, outputs that cannot be written, flags and environment values --------------

@dataclass(frozen=True)
class Run:
    """One command line (after ``gpuwatch``) with ``{d}`` standing for the case's directory. ``names`` is what
    the one-line error must mention (the file, flag or variable at fault)."""

    argv: tuple[str, ...]
    names: str
    env: tuple[tuple[str, str], ...] = ()
    stdout: str | None = None  # a path to send standard output to ({d} allowed), e.g. /dev/full
    max_lines: int = 3  # most message lines (more only where thousands of problems are summarised)
    expect_ok: bool = False  # valid input (text from outside to show): exit 0 is the right answer
    check_raw: bool = False  # nothing printed may hold a raw control character


def special_files(d: Path) -> None:
    """The things a path can name that are not regular files, plus files that name them."""
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "fifo").exists():
        os.mkfifo(d / "fifo")
    (d / "adir").mkdir(exist_ok=True)
    (d / "outbox.sqlite").mkdir(exist_ok=True)  # a state directory whose outbox is a directory
    for name, target in (("fifo-outbox", None), ("zero-outbox", "/dev/zero")):  # ... a FIFO, a link to a device
        (d / name).mkdir(exist_ok=True)
        if not (d / name / "outbox.sqlite").is_symlink() and not (d / name / "outbox.sqlite").exists():
            os.mkfifo(d / name / "outbox.sqlite") if target is None else os.symlink(target, d / name / "outbox.sqlite")
    (d / "ok.yml").write_text("groups: []\n")
    for name, path in SPECIAL.items():
        (d / f"token-{name}.toml").write_text(f'[daemon]\ntoken_file = "{path.format(d=d)}"\n')
        (d / f"secret-{name}.toml").write_text(
            f'[[receivers]]\nname = "r"\nkind = "generic"\nurl = "http://127.0.0.1:9/"\n'
            f'secret_file = "{path.format(d=d)}"\n')
        (d / f"rules-{name}.toml").write_text(f'[alerts]\nrule_paths = ["{path.format(d=d)}"]\n')
    (d / "fifo-in-dir").mkdir(exist_ok=True)
    if not (d / "fifo-in-dir" / "rules.yml").exists():
        os.mkfifo(d / "fifo-in-dir" / "rules.yml")
    extra_files(d)


#: Paths that are not regular files: a device that never ends, one that never ends and is random, a FIFO
#: nobody writes to, a directory, an empty device.
SPECIAL = {"zero": "/dev/zero", "urandom": "/dev/urandom", "fifo": "{d}/fifo", "dir": "{d}/adir",
           "null": "/dev/null"}

HUGE_DIGITS = "9" * 5000


def _runs() -> dict[str, Run]:
    runs: dict[str, Run] = {}
    for name, path in SPECIAL.items():
        runs[f"config-{name}"] = Run(("daemon", "--check-config", "--config", path), path)
        if name != "dir":  # a directory is a valid rule path: its *.yml files are read (see fifo-in-dir)
            runs[f"rules-check-{name}"] = Run(("rules", "check", path), path)
            runs[f"rules-test-rules-{name}"] = Run(("rules", "test", "--rules", path), path)
            runs[f"rule-paths-{name}"] = Run(("daemon", "--check-config", "--config", f"{{d}}/rules-{name}.toml"),
                                             path)
        runs[f"token-file-{name}"] = Run(("daemon", "--check-config", "--config", f"{{d}}/token-{name}.toml"), path)
        runs[f"secret-file-{name}"] = Run(("daemon", "--check-config", "--config", f"{{d}}/secret-{name}.toml"),
                                          path)
        runs[f"config-env-{name}"] = Run(("daemon", "--check-config"), path, env=(("GPUWATCH_CONFIG", path),))
        if name != "null":  # /dev/null reads as an empty file: "not a recording" is the clean answer too
            runs[f"snapshot-replay-{name}"] = Run(("snapshot", "--replay", path), path)
            runs[f"doctor-replay-{name}"] = Run(("doctor", "--replay", path), path)
            runs[f"record-replay-{name}"] = Run(("record", "--replay", path, "-o", "{d}/out.ndjson.gz"), path)
            runs[f"rules-test-replay-{name}"] = Run(("rules", "test", "--replay", path), path)
            runs[f"daemon-replay-{name}"] = Run(("daemon", "--replay", path, "--listen", "127.0.0.1:0",
                                                 "--state-dir", "{d}/state"), path)
    runs["rules-check-fifo-in-dir"] = Run(("rules", "check", "{d}/fifo-in-dir"), "fifo-in-dir")
    # Outputs that cannot be written: a full device, a directory, a path under a missing directory.
    for name, out in (("full", "/dev/full"), ("dir", "{d}/adir"), ("missing-dir", "{d}/no/such/dir/out")):
        runs[f"rules-export-to-{name}"] = Run(("rules", "export", "-o", out), out.rsplit("/", 1)[-1])
        runs[f"record-to-{name}"] = Run(("record", "--replay", BUNDLED, "--to", "2", "-o", out),
                                        out.rsplit("/", 1)[-1])
    runs["rules-show-stdout-full"] = Run(("rules", "show"), "No space left", stdout="/dev/full")
    runs["rules-metrics-stdout-full"] = Run(("rules", "metrics", "--all"), "No space left", stdout="/dev/full")
    runs["snapshot-json-stdout-full"] = Run(("snapshot", "--json", "--replay", BUNDLED), "No space left",
                                            stdout="/dev/full")
    runs["doctor-json-stdout-full"] = Run(("doctor", "--json", "--replay", BUNDLED, "--duration", "5"),
                                          "No space left", stdout="/dev/full")
    # Flags with values no parser should take (or take as something else).
    for flag, value in (("--interval", "1e999"), ("--interval", "nan"), ("--interval", HUGE_DIGITS),
                        ("--speed", "-1"), ("--speed", "inf"), ("--at", "1e400"), ("--at", "nan")):
        runs[f"snapshot-flag{flag}-{value[:8]}"] = Run(("snapshot", "--replay", BUNDLED, flag, value), flag)
    for flag, value in (("--duration", "nan"), ("--duration", "-5"), ("--pid", HUGE_DIGITS),
                        ("--duration", HUGE_DIGITS)):
        runs[f"doctor-flag{flag}-{value[:8]}"] = Run(("doctor", "--replay", BUNDLED, flag, value), flag)
    for value in ("127.0.0.1:" + HUGE_DIGITS, "127.0.0.1:65536", "[::1:80", "127.0.0.1:-1", "a" * 5000 + ":1"):
        runs[f"daemon-listen-{value[-8:]}"] = Run(("daemon", "--check-config", "--listen", value), "listen")
    runs["daemon-state-dir-dev-null"] = Run(("daemon", "--replay", BUNDLED, "--listen", "127.0.0.1:0",
                                             "--state-dir", "/dev/null"), "/dev/null")
    runs["daemon-state-dir-fifo"] = Run(("daemon", "--replay", BUNDLED, "--listen", "127.0.0.1:0",
                                         "--state-dir", "{d}/fifo"), "fifo")
    for name in ("fifo-outbox", "zero-outbox"):
        runs[f"daemon-{name}"] = Run(("daemon", "--replay", BUNDLED, "--listen", "127.0.0.1:0", "--state-dir",
                                      f"{{d}}/{name}"), "not a regular file")
    runs["daemon-outbox-is-a-directory"] = Run(("daemon", "--replay", BUNDLED, "--listen", "127.0.0.1:0",
                                                "--state-dir", "{d}"), "outbox")
    runs["snapshot-dcgm-bad-url"] = Run(("snapshot", "--dcgm", "http://[::1"), "dcgm")
    runs["snapshot-dcgm-file-url"] = Run(("snapshot", "--dcgm", "file:///etc/passwd"), "dcgm")
    runs["record-from-after-to"] = Run(("record", "--replay", BUNDLED, "--from", "5", "--to", "1", "-o",
                                        "{d}/o.ndjson.gz"), "--from")
    runs["install-service-watchdog-huge"] = Run(("install-service", "--watchdog", HUGE_DIGITS), "--watchdog")
    # Environment values: every setting can come from GPUWATCH_<SECTION>_<KEY>.
    for var, value in (("GPUWATCH_DAEMON_LISTEN", "127.0.0.1:" + HUGE_DIGITS),
                       ("GPUWATCH_SAMPLER_INTERVAL", "nan"), ("GPUWATCH_SAMPLER_INTERVAL", "1e999"),
                       ("GPUWATCH_SAMPLER_INTERVAL", HUGE_DIGITS), ("GPUWATCH_NOTIFY_TIMEOUT", "-1s"),
                       ("GPUWATCH_NOTIFY_UNHEALTHY_AFTER", "1s"),
                       ("GPUWATCH_DAEMON_MAX_PROCESS_SERIES", HUGE_DIGITS),
                       ("GPUWATCH_DAEMON_MAX_CONNECTIONS", "0x10"), ("GPUWATCH_DAEMON_TOKEN_FILE", "/dev/zero"),
                       ("GPUWATCH_ALERTS_RULE_PATHS", "/dev/urandom"), ("GPUWATCH_DAEMON_ALLOW_REMOTE", "maybe"),
                       ("GPUWATCH_NO_SUCH_KEY", "1"), ("GPUWATCH_DAEMON_LISTEN", "x" * 100_000)):
        names = value if value.startswith("/dev/") else var  # a file is named by its path, else the variable
        runs[f"env-{var[9:].lower()}-{value[:8]}"] = Run(("daemon", "--check-config"), names, env=((var, value),))
    return runs


BUNDLED = str(Path(__file__).resolve().parents[2] / "gpuwatch" / "data" / "h200-incident.ndjson.gz")
RUNS = _runs()

# Cases of files that are not files, terminal escapes, the compare gate and config text (their own file).
from corpus.cases_files import CONFIG_FILES, RUNS_FILES, extra_files  # noqa: E402

GENERATED["config"].update({name: (lambda data=data: data) for name, data in CONFIG_FILES.items()})
RUNS.update(RUNS_FILES)


def command_cases() -> list[str]:
    return sorted(RUNS)


# --- HTTP requests to a running daemon ----------------------------------------------------------------------

#: Raw requests; each must get a 4xx (or a 200 where the request is valid but odd), never a 5xx, a hang or a
#: traceback in the daemon's log.
HTTP: dict[str, bytes] = {
    "diagnosis-window-1e300": b"GET /api/v1/diagnosis?window=1e300 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "diagnosis-window-nan": b"GET /api/v1/diagnosis?window=nan HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "diagnosis-window-tiny": b"GET /api/v1/diagnosis?window=1e-300 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "diagnosis-pid-huge": b"GET /api/v1/diagnosis?pid=" + HUGE_DIGITS.encode()
    + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "diagnosis-pid-negative": b"GET /api/v1/diagnosis?pid=-1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "diagnosis-pid-twice": b"GET /api/v1/diagnosis?pid=1&pid=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "long-path": b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "long-header": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 200_000 + b"\r\nConnection: close\r\n\r\n",
    "many-headers": b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(5000))
    + b"Connection: close\r\n\r\n",
    "content-length-huge": b"POST /api/v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: " + HUGE_DIGITS.encode()
    + b"\r\nConnection: close\r\n\r\n",
    "content-length-negative": b"POST /api/v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n"
    b"Connection: close\r\n\r\n",
    "chunked-garbage": b"POST /api/v1/reload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    b"Connection: close\r\n\r\nzz\r\n",
    "binary-request-line": bytes(range(1, 256)) + b"\r\n\r\n",
    "http-0.9": b"GET /metrics\r\n\r\n",
    "http-version-99": b"GET /metrics HTTP/99.99\r\nHost: x\r\nConnection: close\r\n\r\n",
    "percent-garbage": b"GET /api/v1/diagnosis?window=%ff%fe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "stream-huge-query": b"GET /api/v1/stream?" + b"a=1&" * 20_000
    + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
}


# --- A dcgm-exporter that misbehaves on the wire (the pages above are well served but wrong) ----------------

#: name -> what the stand-in exporter does; tests/corpus/run.py plays each.
DCGM_BEHAVIOURS = {
    "never-answers": "accepts the connection and sends nothing",
    "headers-then-silence": "sends the status line and headers, then nothing",
    "drips-a-byte-a-second": "sends a valid page one byte a second",
    "endless-body": "sends a body that never ends, without Content-Length",
    "content-length-lies": "says 100 000 bytes and sends 10, then keeps the connection",
    "closes-mid-body": "sends half a page and closes",
    "redirect-loop": "answers 302 to itself",
    "error-500-html": "answers 500 with an HTML page",
    "gzip-bomb": "sends a gzip body that inflates to gigabytes",
    "huge-header": "sends a 1 MiB header line",
}
