"""Text that is valid UTF-8, at the model's boundary.

Linux names are bytes: a process whose executable or command line holds a byte like ``\\xe9`` reaches
Python (psutil, ``/proc``) as a lone surrogate (``\\udce9``), and JSON may carry one as ``"\\udce9"``. Such
a string cannot be encoded, so it fails far from where it came in: every ``/metrics`` scrape, every alert
evaluation (SQLite), every roll-up block. Every string that enters a Snapshot passes :func:`clean` once,
where the Snapshot is built (the collector) and where one is decoded (``model/codec.py``): an undecodable
byte stays visible as ``\\xe9``, any other lone surrogate as ``\\udXXX``, and everything downstream can
encode what it gets.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable
from typing import Any, TypeVar

from gpuwatch.model.walk import map_strings

_PLAIN = (int, float, bool, type(None))

T = TypeVar("T")


def clean(text: str) -> str:
    """``text`` if it encodes as UTF-8 (the common case, at the cost of one check), else with each byte
    that was not UTF-8 written as ``\\xNN`` and any other lone surrogate as ``\\udNNN``."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:  # surrogateescape: the bytes the OS gave, back, then decoded with the bad ones made visible
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no OS byte maps to (JSON "\\ud800")
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def is_clean(text: str) -> bool:
    return clean(text) is text


@functools.cache
def _text_fields(cls: type) -> tuple[str, ...]:
    """The fields of a model record that can hold text: strings, tuples and mappings of them, nested records.
    Numeric tuples (``tuple[float, ...]``) and literal states are left out: nothing to clean, and a tick
    must not walk them."""
    out = []
    for f in dataclasses.fields(cls):
        kind = str(f.type)
        if kind.startswith(("tuple[float", "tuple[int")) or "Literal" in kind or kind.startswith("SourceState"):
            continue
        if any(word in kind for word in ("str", "tuple", "dict", "Sample", "Stack", "Frame", "Health", "Status")):
            out.append(f.name)
    return tuple(out)


def _clean_str(text: str) -> str:
    return text if text.isascii() else clean(text)


@functools.cache
def _text_getter(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    """The text fields of a record class read at once, as one tuple (``attrgetter`` of one name returns the
    value); None for a type that is no record."""
    if not dataclasses.is_dataclass(cls):
        return None
    names = _text_fields(cls)
    if not names:
        return lambda _obj: ()
    getter = operator.attrgetter(*names)
    return getter if len(names) > 1 else lambda obj: (getter(obj),)


def _ascii(value: Any) -> bool:
    """Whether every string :func:`map_strings` would visit in ``value`` is ASCII (walking the same fields
    and containers): then :func:`record` has nothing to clean. No copies are made on the way, where the
    rewriting walk lists every tuple's items to compare them."""
    t: type = type(value)
    if t is str:
        return value.isascii()
    if t in _PLAIN:
        return True
    if t is tuple or t is list:
        return all(map(_ascii, value))
    if t is dict:
        return all(map(_ascii, value)) and all(map(_ascii, value.values()))
    get = _text_getter(t)
    return get is None or all(map(_ascii, get(value)))


def record(obj: T) -> T:
    """``obj`` (a frozen model record: a Snapshot, a sample, a status) with every string in it clean; the
    same object when nothing needed cleaning, so a clean tick allocates nothing. Names are ASCII on almost
    every tick: one walk that only looks says so, and the walk that rewrites runs only when one is not."""
    if _ascii(obj):
        return obj
    return map_strings(obj, _clean_str, _text_fields)
