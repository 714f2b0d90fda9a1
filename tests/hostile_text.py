"""Text that steers a terminal when printed raw, as any user on a shared host can put it in a process name
or command line: clear the screen, write the reader's clipboard (OSC 52), ask the terminal to type an
answer (a CSI query), an 8-bit CSI, a bell, a bidi override. And a recording whose processes, users and
hostname carry it, made from the bundled H200 recording (so the doctor and the rules have real things to
say about those processes)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpuwatch.data import bundled_recording
from gpuwatch.model.recording import RecordingWriter, load, read_header

CLEAR = "\x1b[2J\x1b[H"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"  # OSC 52: put "rm -rf ~" on the clipboard
QUERY = "\x1b[6n"  # the terminal answers by typing into the input
CSI8 = "\x9b31m"
BIDI = "\u202e"
NAME = f"py{CLEAR}thon{CLIPBOARD}"
CMDLINE = f"python3 serve.py {QUERY}--x {CSI8}{BIDI}evil\r"
USER = f"mal{CLEAR}lory"
HOST = f"node{CLIPBOARD}1"
#: What no text output may contain: the introducers of every sequence above.
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def write_hostile_recording(path: Path, seconds: int | None = None) -> Path:
    header = read_header(bundled_recording())
    snaps = load(bundled_recording())[:seconds]
    with RecordingWriter(path, dataclasses.replace(header, hostname=HOST)) as w:
        for s in snaps:
            procs = tuple(dataclasses.replace(p, name=NAME, cmdline=CMDLINE, user=USER) for p in s.processes)
            w.write(dataclasses.replace(s, processes=procs, host=dataclasses.replace(s.host, hostname=HOST)))
    return path


def raw_in(text: str) -> list[str]:
    """The raw control characters in ``text`` (empty: nothing there can steer a terminal)."""
    return [repr(c) for c in RAW if c in text]
