"""A process whose name and command line hold terminal escape sequences (screen clear, an OSC 52 clipboard
write, a CSI query, an 8-bit CSI, a bidi override), run by another user on a shared host, is shown with
those characters made visible by every text output: ``snapshot``, ``doctor``, ``rules test``, ``report``
(text and CSV), ``compare``, the error line and the log. Each command runs as a real process over a
recording of such a host; nothing it prints may carry a raw ESC, BEL, C1 CSI, bidi override or CR."""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from doctor.synthetic import Load, window
from hostile_text import CLIPBOARD, NAME, raw_in, write_hostile_recording
from rich.console import Console

from gpuwatch.cli.doctor import render
from gpuwatch.doctor import diagnose
from gpuwatch.doctor.window import summarise
from gpuwatch.model.finding import Finding
from gpuwatch.model.process_sample import CPU_QUOTA
from gpuwatch.model.visible import visible, visible_fields, visible_lines


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the file name itself is hostile too: compare and the error lines print it
    return write_hostile_recording(tmp_path_factory.mktemp("hostile") / "run\x1b[2J.ndjson.gz")


def _gpuwatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd)}
    return subprocess.run([sys.executable, "-m", "gpuwatch", *args], capture_output=True, text=True,
                          errors="surrogateescape", env=env, cwd=cwd, timeout=300)


COMMANDS = {
    "snapshot": ("snapshot", "--replay", "{r}", "--at", "300"),
    "doctor": ("doctor", "--replay", "{r}"),
    "rules test": ("rules", "test", "--replay", "{r}"),
    "report": ("report", "--replay", "{r}"),
    "report csv": ("report", "--replay", "{r}", "--csv", "--by", "owner"),
    "compare": ("compare", "--no-chart", "{r}", "{r}"),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_text_output_shows_escape_sequences_from_a_process_as_visible_text(
        hostile: Path, tmp_path: Path, command: str) -> None:
    done = _gpuwatch(*(a.format(r=hostile) for a in COMMANDS[command]), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert raw_in(done.stdout) == [] and raw_in(done.stderr) == []
    assert "\\x1b" in done.stdout  # the sequence is there to be seen, written out


def test_the_snapshot_table_shows_the_name_and_command_line_written_out(hostile: Path, tmp_path: Path) -> None:
    out = _gpuwatch("snapshot", "--replay", str(hostile), "--at", "300", cwd=tmp_path).stdout
    # the command as every view labels it (the interpreter dropped: model/command.py), its escapes written out
    assert "serve.py \\x1b[6n--x \\x9b31m\\u202eevil" in out and visible("node" + CLIPBOARD + "1") in out


def test_an_error_line_naming_a_hostile_file_shows_it_written_out(tmp_path: Path) -> None:
    bad = tmp_path / "x\x1b]52;c;aGk=\x07.ndjson.gz"
    bad.write_bytes(b"not a recording")
    done = _gpuwatch("doctor", "--replay", str(bad), cwd=tmp_path)
    assert done.returncode != 0 and "x\\x1b]52;c;aGk=\\x07" in done.stderr and raw_in(done.stderr) == []


def test_process_names_and_rich_markup_in_names_do_not_restyle_or_break_the_doctor(tmp_path: Path) -> None:
    """A name like "[/]" would be a rich markup error (an internal error); "[bold]" would restyle the page."""
    out = io.StringIO()
    f = Finding(code="x", title=f"process [/] {NAME} starves the GPU", severity="warning", score=1.0,
                gpu_index=0, pid=1, evidence=(f"[bold]{NAME}[/bold] waits",), fix="see [/x]")
    render([f], "recording [red]", 10, Console(file=out, color_system=None, width=200))
    text = out.getvalue()
    assert "[/]" in text and "[bold]" in text and "[red]" in text and raw_in(text) == []


def test_names_the_doctor_reads_of_other_processes_are_made_visible_too() -> None:
    # a process under the same CPU quota, and one holding a file lock, are named by /proc/PID/comm: anyone's
    snaps = window(Load(util=5.0, sm=3.0, thread=50.0))
    peer = dataclasses.replace(snaps[-1].processes[0], cpu_limit_cores=2.0, cpu_limit_by=CPU_QUOTA,
                               cpu_throttled_percent=100.0, cpu_limit_peer_pids=(580,), cpu_limit_peer_names=(NAME,),
                               cpu_limit_peer_cpu_percents=(90.0,), file_lock_holder_pid=581,
                               file_lock_holder_name=NAME)
    snaps = [dataclasses.replace(s, processes=(peer,)) for s in snaps]
    p = summarise(snaps)[0].processes[0]
    assert p.limit_peers[0][1] == NAME and p.file_lock_holder == (581, NAME)
    findings = diagnose(snaps)
    assert any(NAME in e for f in findings for e in f.evidence)  # the names reach the evidence...
    out = io.StringIO()
    render(findings, "recording", 10, Console(file=out, color_system=None, width=200))
    assert "580" in out.getvalue() and raw_in(out.getvalue()) == []  # ...and are shown without steering anything


def test_the_path_a_blocked_write_goes_to_is_made_visible_too() -> None:
    # read from /proc/PID/fd: a terminal device, but a path can be anyone's name
    target = f"/dev/pts/{NAME}"
    snaps = window(Load(util=5.0, sm=3.0, thread=1.0, waits=("output",), channel="wait_woken"))
    snaps = [dataclasses.replace(s, processes=tuple(dataclasses.replace(q, write_target=target) for q in s.processes))
             for s in snaps]
    findings = diagnose(snaps)
    assert any(target in e for f in findings for e in f.evidence)  # the path reaches the evidence...
    out = io.StringIO()
    render(findings, "recording", 10, Console(file=out, color_system=None, width=200))
    assert "/dev/pts/" in out.getvalue() and raw_in(out.getvalue()) == []  # ...and is shown without steering


def test_the_helper_writes_every_control_character_and_nothing_else() -> None:
    assert visible("plain name ünïcode 名前") == "plain name ünïcode 名前"
    assert visible("a\x1b[2Jb\x07\x9b\u202e\udce9\n") == "a\\x1b[2Jb\\x07\\x9b\\u202e\\udce9\\x0a"
    assert visible_lines("line\x1b\n\tnext\r") == "line\\x1b\n\tnext\\x0d"
    assert visible(visible("\x1b")) == visible("\x1b")  # once is enough: showing it twice changes nothing
    clean = ("a", ["b", {"k": "v"}])
    assert visible_fields(clean) is clean and visible_fields(("\x1b",)) == ("\\x1b",)
