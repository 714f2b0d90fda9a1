"""Text from outside made safe to show on a terminal: every control character written out visibly.

Process names and command lines, user names, hostnames, GPU and label values, rule names and config values
are chosen by whoever runs a process on the host or writes the file. Printed raw, ``ESC [ 2 J`` clears the
screen, ``ESC ] 52 ; c ; ...`` writes the reader's clipboard, ``ESC [ 6 n`` makes the terminal type an answer
into the shell, and a bidi override reorders what is read. Every text output (the command line's tables,
messages, the log, the dashboard) passes such text through :func:`visible` (or :func:`visible_lines` for a
whole block of plain text gpuwatch laid out itself), which writes each of these characters as a Python
escape: ``\\x1b``, ``\\x07``, ``\\x9b``, ``\\u202e``. JSON output needs none of this: JSON escapes them.
"""

from __future__ import annotations

import re
from typing import TypeVar

from gpuwatch.model.walk import map_strings

T = TypeVar("T")

#: C0 controls (tab and newline included), DEL, C1 controls (0x9b is an 8-bit CSI), bidi embeddings,
#: overrides and isolates, line/paragraph separators, and lone surrogates (bytes that were not UTF-8).
_OTHER = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_ANY = re.compile(f"[\x00-\x1f{_OTHER}]")
_BUT_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHER}]")  # tab (0x09) and newline (0x0a) kept


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """``text`` (made a str) with every control character written as an escape, newlines and tabs too:
    the result is one line that cannot steer a terminal."""
    s = text if isinstance(text, str) else str(text)
    return _ANY.sub(_escape, s) if _ANY.search(s) else s


def visible_lines(text: str) -> str:
    """:func:`visible` for a block of lines: newlines and tabs are kept, every other control escaped."""
    return _BUT_LINES.sub(_escape, text) if _BUT_LINES.search(text) else text


def visible_fields(obj: T) -> T:
    """``obj`` (a dataclass such as a Snapshot, an Alert or a Finding, or tuples, lists and dicts of them)
    with :func:`visible` applied to every string in it, however deep; the very same object where no string
    needed it, so a screen that shows many of them a second copies nothing on a clean host."""
    return map_strings(obj, _visible_str)


def _visible_str(v: str) -> str:
    return _ANY.sub(_escape, v) if _ANY.search(v) else v


__all__ = ["visible", "visible_fields", "visible_lines"]
