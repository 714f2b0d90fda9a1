"""Corpus cases for files that are not files, text that steers a terminal, a CI gate given nothing, and
config text that is not one line.

- Every option of every command that names a file or directory, taken from the parsers themselves, given
  ``/dev/zero``, ``/dev/urandom``, a FIFO nobody writes to, and the wrong kind of path.
- ``validate --from-details`` and ``compare --details`` given JSON nested 100 000 deep, a 5 000-digit
  number, bytes that are not UTF-8, 17 MiB, nothing, half an object, and JSON of the wrong shape.
- ``compare BASE NEW`` with a NEW (or BASE) that has no samples, no GPU, lost GPUs, two samples, a tenth
  of BASE.
- Config values holding CR/LF, ESC sequences, BEL, an 8-bit CSI or NUL in every kind of text key, from the
  file and from the environment; ten thousand missing rule files; a rule file with 200 broken rules.
- A recording whose process names, command lines, users and hostname hold escape sequences, through every
  text output (exit 0, nothing raw), and escape sequences in file names and flag values (one clear line,
  nothing raw).
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

from corpus.cases import BUNDLED, Run
from gpuwatch.cli.main import build_parser
from gpuwatch.cli.paths import KINDS
from gpuwatch.model.recording import RecordingHeader, RecordingWriter, load, read_header

# --- Files that are not files, for every file option of every command -----------------------------------

#: What each kind of path option is given: the things it cannot use.
WRONG = {
    "file": {"zero": "/dev/zero", "urandom": "/dev/urandom", "fifo": "{d}/fifo", "dir": "{d}/adir"},
    "file-or-directory": {"zero": "/dev/zero", "urandom": "/dev/urandom", "fifo": "{d}/fifo"},
    "directory": {"zero": "/dev/zero", "fifo": "{d}/fifo", "file": "{d}/ok.yml"},
}


def _file_options() -> list[tuple[tuple[str, ...], argparse.Action]]:
    out = []

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*prefix, name))
            elif prefix and action.type in KINDS:
                out.append((prefix, action))

    walk(build_parser(), ())
    return out


def _option_runs() -> dict[str, Run]:
    runs = {}
    for cmd, action in _file_options():
        flag = action.option_strings[-1] if action.option_strings else action.dest
        for what, path in WRONG[KINDS[action.type]].items():  # type: ignore[index]
            args = (path, path) if not action.option_strings and action.nargs == "*" else (path,)
            argv = (*cmd, *args) if not action.option_strings else (*cmd, flag, path)
            runs[f"file-option-{'-'.join(cmd)}{flag.lstrip('-') if action.option_strings else ''}-{what}"] = Run(
                argv, path, check_raw=True)
    return runs


# --- JSON a user names: validate --from-details, compare --details -------------------------------------------

DETAILS = {
    "deep-array.json": b"[" * 100_000 + b"]" * 100_000,
    "deep-object.json": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "huge-int.json": b'{"runs": ' + b"9" * 5000 + b"}",
    "not-utf8.json": b'{"runs": "\xff\xfe"}',
    "empty.json": b"",
    "half-an-object.json": b'{"runs": [1, ',
    "too-big.json": None,  # 17 MiB of spaces, written below
}
#: Valid JSON of the wrong shape: validate reads the structure (compare's --stages decides before it does).
WRONG_SHAPE = {"a-list.json": b"[1, 2, 3]", "a-string.json": b'"validation"', "nan.json": b'{"runs": NaN}',
               "escape-in-key.json": b'{"\\u001b]52;c;aGk=\\u0007": 1}'}


def _details_runs() -> dict[str, Run]:
    runs = {}
    for name in [*DETAILS, *WRONG_SHAPE]:
        runs[f"validate-from-details-{name}"] = Run(
            ("validate", "--from-details", f"{{d}}/details/{name}", "--out", "{d}/vout"), name, check_raw=True)
    for name in DETAILS:
        runs[f"compare-details-{name}"] = Run(("compare", "--stages", BUNDLED, "--details", f"{{d}}/details/{name}"),
                                              name, check_raw=True)
    return runs


# --- compare as a CI gate: runs that measured nothing ---------------------------------------------------------

GATE = ("empty", "gpu-less", "gpus-lost", "two-samples", "a-tenth")


def _gate_runs() -> dict[str, Run]:
    runs = {}
    for name in GATE:
        new = f"{{d}}/gate/{name}.ndjson.gz"
        runs[f"compare-new-{name}"] = Run(("compare", "--no-chart", BUNDLED, new), f"{name}.ndjson.gz")
        runs[f"compare-json-new-{name}"] = Run(("compare", "--json", BUNDLED, new), f"{name}.ndjson.gz")
    for name in ("empty", "gpu-less"):
        runs[f"compare-base-{name}"] = Run(("compare", f"{{d}}/gate/{name}.ndjson.gz", BUNDLED), f"{name}.ndjson.gz")
    return runs


# --- Config text that is not one line ---------------------------------------------------------------------------

#: Control characters as TOML writes them in a basic string.
CONTROLS = {"crlf": "\\r\\n", "osc52": "\\u001b]52;c;aGk=\\u0007", "bel": "\\u0007", "csi8": "\\u009b2J",
            "nul": "\\u0000"}
RECEIVER = '[[receivers]]\nname = "{name}"\nkind = "generic"\nurl = "{url}"\nsecret_env = "{env}"\n'
#: key -> a config with ``{x}`` where the control character goes.
TEXT_KEYS = {
    "receiver-name": RECEIVER.format(name="ops{x}", url="http://127.0.0.1:9/", env="S"),
    "receiver-url": RECEIVER.format(name="ops", url="http://127.0.0.1:9/hook{x}X-Injected: 1", env="S"),
    "receiver-url-end": RECEIVER.format(name="ops", url="http://127.0.0.1:9/hook{x}", env="S"),
    "receiver-secret-env": RECEIVER.format(name="ops", url="http://127.0.0.1:9/", env="S{x}"),
    "receiver-secret-file": RECEIVER.format(name="ops", url="http://127.0.0.1:9/", env="S")
    .replace('secret_env = "S"', 'secret_file = "/tmp/s{x}"'),
    "receiver-group-by": RECEIVER.format(name="ops", url="http://127.0.0.1:9/", env="S")
    + 'group_by = ["alertname", "gpu{x}"]\n',
    "receiver-match-key": RECEIVER.format(name="ops", url="http://127.0.0.1:9/", env="S")
    + 'match = {{ "sev{x}" = "critical" }}\n',
    "receiver-match-value": RECEIVER.format(name="ops", url="http://127.0.0.1:9/", env="S")
    + 'match = {{ severity = "crit{x}" }}\n',
    "daemon-listen": '[daemon]\nlisten = "127.0.0.1{x}:19464"\n',
    "daemon-token-file": '[daemon]\ntoken_file = "/etc/token{x}"\n',
    "daemon-state-dir": '[daemon]\nstate_dir = "/var/lib/gw{x}"\n',
    "daemon-external-url": '[daemon]\nexternal_url = "http://gw.example/{x}"\n',
    "sources-dcgm-url": '[sources]\ndcgm_url = "http://127.0.0.1:9400/metrics{x}"\n',
    "sources-kubelet-socket": '[sources]\nkubelet_socket = "/run/kubelet{x}.sock"\n',
    "alerts-rule-paths": '[alerts]\nrule_paths = ["/etc/rules{x}.yml"]\n',
    "exporter-names": '[exporter]\nnames = "gpuwatch{x}"\n',
}


def _config_files() -> dict[str, bytes]:
    return {f"control-{key}-{c}.toml": text.replace("{x}", esc).replace("{{", "{").replace("}}", "}").encode()
            for key, text in TEXT_KEYS.items() for c, esc in CONTROLS.items()}


ENV_VALUES = {"GPUWATCH_DAEMON_STATE_DIR": "/var/lib/gw\x1b[2J", "GPUWATCH_SOURCES_DCGM_URL": "http://h:9400/\r\nX: 1",
              "GPUWATCH_ALERTS_RULE_PATHS": "/etc/r\x1b]52;c;aGk=\x07.yml", "GPUWATCH_DAEMON_EXTERNAL_URL":
              "http://gw/\x9b2J", "GPUWATCH_DAEMON_LISTEN": "127.0.0.1:1\x07", "GPUWATCH_DAEMON_TOKEN_FILE": "/t\r"}


def _config_runs() -> dict[str, Run]:
    runs = {f"env-control-{var[9:].lower()}": Run(("daemon", "--check-config"), var, env=((var, value),),
                                                   check_raw=True) for var, value in ENV_VALUES.items()}
    # Ten thousand problems of one kind: the first few, then a count (was: ten thousand lines).
    runs["config-ten-thousand-missing-rule-files"] = Run(("daemon", "--check-config", "--config",
                                                          "{d}/many/rules.toml"), "more like this", max_lines=4)
    runs["rules-check-ten-thousand-missing-files"] = Run(("rules", "check", *(f"{{d}}/many/missing-{i}.yml"
                                                                              for i in range(10_000))),
                                                         "more like this", max_lines=5)
    runs["rules-check-two-hundred-broken-rules"] = Run(("rules", "check", "{d}/many/broken.yml"), "more like this",
                                                       max_lines=6)
    return runs


# --- Text that steers a terminal ------------------------------------------------------------------------------

ESC_NAME = "py\x1b[2J\x1b[Hthon\x1b]52;c;cm0gLXJmIH4K\x07"
ESC_CMDLINE = "python3 serve.py \x1b[6n--x \x9b31m\u202eevil\r"
HOSTILE = "{d}/escapes/hostile.ndjson.gz"
#: A file whose name holds an escape sequence and that is not a recording.
ESC_FILE = "{d}/escapes/not\x1b]52;c;aGk=\x07.ndjson.gz"


def _escape_runs() -> dict[str, Run]:
    shows = {
        "snapshot": ("snapshot", "--replay", HOSTILE, "--at", "300"),
        "doctor": ("doctor", "--replay", HOSTILE),
        "rules-test": ("rules", "test", "--replay", HOSTILE),
        "report": ("report", "--replay", HOSTILE),
        "report-csv": ("report", "--replay", HOSTILE, "--csv", "--by", "owner"),
        "compare": ("compare", "--no-chart", HOSTILE, HOSTILE),
    }
    runs = {f"escapes-shown-by-{k}": Run(argv, "", expect_ok=True, check_raw=True) for k, argv in shows.items()}
    for cmd in (("snapshot", "--replay"), ("doctor", "--replay"), ("rules", "test", "--replay"),
                ("report", "--replay"), ("record", "-o", "{d}/o.ndjson.gz", "--replay")):
        runs[f"escapes-in-file-name-{'-'.join(c for c in cmd if not c.startswith(('-', '{')))}"] = Run(
            (*cmd, ESC_FILE), "not\\x1b]52", check_raw=True)
    runs["escapes-in-compare-file-name"] = Run(("compare", ESC_FILE, BUNDLED), "not\\x1b]52", check_raw=True)
    runs["escapes-in-rules-check-path"] = Run(("rules", "check", "{d}/no\x1b[2J.yml"), "no\\x1b[2J", check_raw=True)
    for name, argv, names in (
            ("doctor-pid", ("doctor", "--pid", "\x1b[2J"), "--pid"),
            ("snapshot-dcgm", ("snapshot", "--dcgm", "http://h\x1b]52;c;aGk=\x07/"), "dcgm"),
            ("daemon-listen", ("daemon", "--check-config", "--listen", "\x1b[2J:1"), "listen"),
            ("report-since", ("report", "--replay", BUNDLED, "--since", "\x1b[6n"), "--since"),
            ("compare-threshold", ("compare", "--threshold", "p99_ms=\x1b[2J", BUNDLED, BUNDLED), "--threshold"),
            ("record-from", ("record", "--replay", BUNDLED, "--from", "\x9b2J", "-o", "{d}/o.ndjson.gz"), "--from"),
            ("snapshot-interval", ("snapshot", "--replay", BUNDLED, "--interval", "1\x07"), "--interval")):
        runs[f"escapes-in-flag-{name}"] = Run(argv, names, check_raw=True)
    return runs


# --- The files the runs above name, made once per directory --------------------------------------------------

def _write_recording(path: Path, snaps: list, header: RecordingHeader) -> None:  # type: ignore[type-arg]
    with RecordingWriter(path, header) as w:
        for s in snaps:
            w.write(s)


_MADE: list[Path] = []


def extra_files(d: Path) -> None:
    """Put what the runs of this module name under ``d``: written once per process into a directory of its
    own (a recording of the whole bundled run, 17 MiB of JSON), then linked into each case's directory."""
    if not _MADE:
        made = Path(tempfile.mkdtemp(prefix="gpuwatch-corpus-"))
        atexit.register(shutil.rmtree, made, True)
        _make(made)
        _MADE.append(made)
    for sub in SUBDIRS:
        if not (d / sub).exists():
            (d / sub).symlink_to(_MADE[0] / sub, target_is_directory=True)


SUBDIRS = ("details", "gate", "escapes", "many")


def _make(d: Path) -> None:
    for sub in SUBDIRS:
        (d / sub).mkdir(parents=True, exist_ok=True)
    for name, data in {**DETAILS, **WRONG_SHAPE}.items():
        (d / "details" / name).write_bytes(data if data is not None else b" " * (17 << 20))
    header = read_header(BUNDLED)
    snaps = load(BUNDLED)
    gate = {"empty": [], "gpu-less": [dataclasses.replace(s, gpus=()) for s in snaps],
            "gpus-lost": [dataclasses.replace(s, gpus=tuple(dataclasses.replace(g, lost=True) for g in s.gpus))
                          for s in snaps],
            "two-samples": snaps[:2], "a-tenth": snaps[: len(snaps) // 10]}
    for name, run in gate.items():
        _write_recording(d / "gate" / f"{name}.ndjson.gz", run, header)
    hostile = [dataclasses.replace(s, host=dataclasses.replace(s.host, hostname="node\x1b]52;c;aGk=\x07"),
                                   processes=tuple(dataclasses.replace(p, name=ESC_NAME, cmdline=ESC_CMDLINE,
                                                                       user="mal\x1b[2Jlory") for p in s.processes))
               for s in snaps]
    _write_recording(d / "escapes" / "hostile.ndjson.gz", hostile, header)
    (d / "escapes" / "not\x1b]52;c;aGk=\x07.ndjson.gz").write_bytes(b"not a recording\n")
    rules = json.dumps([str(d / "many" / f"missing-{i}.yml") for i in range(10_000)])
    (d / "many" / "rules.toml").write_text(f"[alerts]\nrule_paths = {rules}\n")
    broken = "".join(f"  - alert: Broken{i}\n    for: 1m\n" for i in range(200))
    (d / "many" / "broken.yml").write_text(f"groups:\n- name: g\n  rules:\n{broken}")


CONFIG_FILES = _config_files()
RUNS_FILES: dict[str, Run] = {**_option_runs(), **_details_runs(), **_gate_runs(), **_config_runs(),
                              **_escape_runs()}
