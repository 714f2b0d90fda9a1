"""The one base of every error that a user's input causes (a file, a flag, a page, a value), so the
command line can turn all of them into one line in one place, and tell them from bugs."""

from __future__ import annotations

import re


class InputError(ValueError):
    """Bad input, not a bug: its message names the input (file:line where there is one) and what to do."""


#: How many of one kind of error are listed before the rest are counted.
SHOWN_ALIKE = 3
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\d+")


def _kind(message: str) -> str:
    """What an error says with where and which taken out: the location before the first ': ', quoted names
    and numbers (so 10 000 missing files are one kind, and two different problems are two)."""
    _, sep, rest = message.partition(": ")
    return _NUMBER.sub("N", _QUOTED.sub("'...'", rest if sep else message))


def summarize(messages: list[str], shown: int = SHOWN_ALIKE) -> list[str]:
    """``messages`` with each kind listed at most ``shown`` times, then "... and N more like this": ten
    thousand missing files are four lines, not ten thousand, while different problems are all listed."""
    counts: dict[str, int] = {}
    for m in messages:
        counts[_kind(m)] = counts.get(_kind(m), 0) + 1
    out: list[str] = []
    seen: dict[str, int] = {}
    for m in messages:
        kind = _kind(m)
        seen[kind] = seen.get(kind, 0) + 1
        if seen[kind] <= shown:
            out.append(m)
            if seen[kind] == shown and counts[kind] > shown:
                out.append(f"... and {counts[kind] - shown} more like this")
    return out
