"""One walk over model records that rewrites their strings and copies only what changed.

Two boundaries rewrite every string of a record tree: text made valid UTF-8 where a Snapshot is built or
decoded (``model/text.py``) and control characters made visible before a terminal shows them
(``model/visible.py``). Both must return the very same object where no string changed, so that a clean
tick or a clean screen allocates nothing; this module is that walk, once, given the string function.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

_PLAIN = (int, float, bool, type(None))
StrFn = Callable[[str], str]
FieldsOf = Callable[[type], tuple[str, ...]]


@functools.cache
def init_fields(cls: type) -> tuple[str, ...]:
    """Every field a record's constructor takes: what ``dataclasses.replace`` can set."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def map_strings(value: Any, fn: StrFn, fields_of: FieldsOf = init_fields) -> Any:
    """``value`` with ``fn`` applied to every string in it (in tuples, lists, dict keys and values, and the
    ``fields_of`` fields of nested dataclasses); the same object wherever ``fn`` changed nothing."""
    t = type(value)
    if t is str:
        return fn(value)
    if t in _PLAIN:
        return value
    if t is tuple or t is list:
        if not value:
            return value
        items = [map_strings(x, fn, fields_of) for x in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else t(items)
    if t is dict:
        if not value:
            return value
        pairs = [(map_strings(k, fn, fields_of), map_strings(x, fn, fields_of)) for k, x in value.items()]
        same = all(a is k and b is x for (a, b), (k, x) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for name in fields_of(t):
            old = getattr(value, name)
            new = map_strings(old, fn, fields_of)
            if new is not old:
                changes[name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value
