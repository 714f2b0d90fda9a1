"""Inputs that used to crash, hang or be taken wrongly: special files read whole, numbers past any reading,
a header version of ``true``, ten thousand GPUs in one snapshot, a rule naming a source that does not
exist, and the one place where the command line turns every input error into a line."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuwatch.alerts import RuleError
from gpuwatch.alerts.condition_fields import SOURCE_NAMES
from gpuwatch.alerts.loader import parse_rules
from gpuwatch.cli import main as cli_main
from gpuwatch.daemon.sd_notify import WATCHDOG_STARTUP_GRACE_S, watchdog_may_ping
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model import files
from gpuwatch.model.codec import CAP_SOURCE, MAX_GPUS, SnapshotFormatError, snapshot_from_dict
from gpuwatch.model.errors import InputError
from gpuwatch.model.recording import RecordingError, load, read_header

HEADER = {"gpuwatch_recording": 1, "created": 1764666000.0, "interval_s": 1.0, "hostname": "h", "description": "",
          "meta": {}}
SNAP = {"time": 1764666000.0, "host": {"hostname": "h"}, "gpus": [{"index": 0, "uuid": "GPU-0"}]}


def recording(path: Path, *lines: object) -> Path:
    path.write_bytes(gzip.compress("".join((x if isinstance(x, str) else json.dumps(x)) + "\n"
                                           for x in lines).encode()))
    return path


# --- special files: refused at once, never read whole ------------------------------------------------------

@pytest.mark.parametrize("special", ["/dev/zero", "/dev/urandom", "fifo", "directory"])
def test_a_path_that_is_not_a_regular_file_is_refused_without_reading_or_waiting(tmp_path: Path,
                                                                                 special: str) -> None:
    if special == "fifo":
        os.mkfifo(tmp_path / "fifo")  # nobody writes to it: opening it for reading would block forever
    path = {"fifo": str(tmp_path / "fifo"), "directory": str(tmp_path)}.get(special, special)
    done: list[BaseException] = []

    def read() -> None:
        try:
            files.read_text(path, 1024)
        except OSError as exc:
            done.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(5)
    assert done, f"reading {path} did not return"
    assert isinstance(done[0], files.NotARegularFile) and "not a regular file" in str(done[0])


def test_a_regular_file_past_the_limit_is_refused_after_reading_one_byte_more(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 1025)
    (tmp_path / "fits").write_bytes(b"x" * 1024)
    with pytest.raises(files.FileTooBig, match="larger than 1 KiB"):
        files.read_bytes(big, 1024)
    assert files.read_bytes(tmp_path / "fits", 1024) == b"x" * 1024


# --- recordings: numbers, versions and sizes no recorder writes ---------------------------------------------

def test_a_header_version_of_true_or_1_0_is_not_version_1(tmp_path: Path) -> None:
    for version in (True, 1.0, "1"):
        path = recording(tmp_path / "r.ndjson.gz", {**HEADER, "gpuwatch_recording": version}, SNAP)
        with pytest.raises(RecordingError, match=r":1: recording format .* is not supported"):
            read_header(path)


@pytest.mark.parametrize("change", [{"time": 1e308}, {"time": -5.0}, {"time": 10**5000},
                                    {"gpus": [{"index": 0, "uuid": "G", "gpu_util": 1e308}]},
                                    {"gpus": [{"index": 10**30, "uuid": "G"}]}])
def test_numbers_past_any_real_reading_are_refused_with_the_field(change: dict[str, object]) -> None:
    with pytest.raises(SnapshotFormatError, match=r"out of range|not a Unix time"):
        snapshot_from_dict({**SNAP, **change})


def test_a_recording_line_with_a_number_of_thousands_of_digits_is_a_recording_error(tmp_path: Path) -> None:
    path = recording(tmp_path / "r.ndjson.gz", HEADER, SNAP, '{"time": ' + "9" * 5000 + ', "host": {}}', SNAP)
    with pytest.raises(RecordingError, match=r"r.ndjson.gz:3: a number of thousands of digits"):
        load(path)


@pytest.mark.serial  # bounds CPU share, wall time or RSS: measured alone, after the parallel part
def test_ten_thousand_gpus_are_capped_to_256_and_what_was_dropped_is_said(tmp_path: Path) -> None:
    many = {**SNAP, "gpus": [{"index": i, "uuid": f"GPU-{i}", "gpu_util": 50.0} for i in range(10_000)]}
    snap = load(recording(tmp_path / "r.ndjson.gz", HEADER, many))[0]
    started = time.monotonic()
    body = render(Exporter(SnapshotCollector(lambda: snap, lambda: ())).registry)
    took = time.monotonic() - started
    assert len(snap.gpus) == MAX_GPUS
    status = snap.source(CAP_SOURCE)
    assert status is not None and status.state == "error" and status.message is not None
    assert "dropped 9744 GPU(s) past the first 256" in status.message
    assert len(body) < 5_000_000 and took < 5.0  # 10 000 GPUs rendered 64.6 MB in 10.4 s


# --- rules: a name nothing has is an error with file:line ---------------------------------------------------

def test_stale_naming_a_source_that_does_not_exist_is_an_error_with_file_and_line() -> None:
    text = "groups:\n- name: g\n  rules:\n  - alert: S\n    condition: {stale: {source: nosuch}}\n"
    with pytest.raises(RuleError, match=r"r.yml:5: rule 'S': stale.source: unknown source 'nosuch'"):
        parse_rules(text, "r.yml")
    text = "groups:\n- name: g\n  rules:\n  - alert: S\n    condition: {stale: {sources: [nvml, dcgmm]}}\n"
    with pytest.raises(RuleError, match="did you mean 'dcgm'"):
        parse_rules(text, "r.yml")


def test_the_source_names_rules_accept_are_the_sources_that_exist() -> None:
    from gpuwatch.sources.dcgm.source import DcgmSource
    from gpuwatch.sources.host import HostSource
    from gpuwatch.sources.kubelet.source import KubeletSource
    from gpuwatch.sources.nvml.source import NvmlSource
    from gpuwatch.sources.stack_source import StackSource

    assert set(SOURCE_NAMES) == {s.name for s in (NvmlSource, DcgmSource, HostSource, KubeletSource, StackSource)}


# --- the watchdog --------------------------------------------------------------------------------------------

def test_the_watchdog_is_pinged_only_while_healthy_or_still_starting() -> None:
    assert watchdog_may_ping(True, 1e6, True, False)
    assert watchdog_may_ping(False, 1.0, False, False)  # starting: no snapshot yet, within the grace
    assert not watchdog_may_ping(False, 1.0, False, True)  # sampling failed before the first snapshot
    assert not watchdog_may_ping(False, WATCHDOG_STARTUP_GRACE_S + 1, False, False)  # never got going
    assert not watchdog_may_ping(False, 1.0, True, False)  # was running, now unhealthy


# --- the command line: one place for every input error ------------------------------------------------------

def test_every_input_error_class_derives_from_one_base_the_command_line_catches() -> None:
    from gpuwatch.config import ConfigError
    from gpuwatch.notify import SecretError

    for cls in (RecordingError, SnapshotFormatError, ConfigError, RuleError, SecretError):
        assert issubclass(cls, InputError)


def test_an_error_no_command_expected_is_one_line_that_says_it_is_a_bug(capsys: pytest.CaptureFixture[str]) -> None:
    class Args:
        verbose = 0

        @staticmethod
        def func(_: object) -> int:
            raise OverflowError("int too large to convert to float")

    assert cli_main.run_command(Args()) == cli_main.EXIT_BUG  # type: ignore[arg-type]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gpuwatch: internal error: OverflowError: int too large to convert to float (this is a bug; "
                   "run with -v for the traceback)"]


@pytest.mark.parametrize("argv", [["doctor", "--replay", "{bad}"], ["snapshot", "--replay", "{bad}", "--at", "9"],
                                  ["rules", "test", "--replay", "{bad}"], ["record", "--replay", "{bad}", "-o",
                                                                            "{out}"]])
def test_a_bad_recording_line_is_one_line_in_every_command(tmp_path: Path, argv: list[str]) -> None:
    good = [{**SNAP, "time": 1764666000.0 + i} for i in range(20)]
    bad = recording(tmp_path / "bad.ndjson.gz", HEADER, *good[:5], "{not json", *good[5:])
    args = [a.format(bad=bad, out=tmp_path / "out.ndjson.gz") for a in argv]
    done = subprocess.run([sys.executable, "-m", "gpuwatch", *args], capture_output=True, text=True, timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode not in (0, cli_main.EXIT_BUG) and "Traceback" not in done.stderr
    assert len(lines) == 1 and "bad.ndjson.gz:7:" in lines[0], done.stderr
