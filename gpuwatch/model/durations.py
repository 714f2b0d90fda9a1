"""The one duration grammar of gpuwatch, shared by the config file, the environment and alert rules.

Prometheus's durations (``500ms``, ``30s``, ``5m``, ``1h30m``, ``2w``: units y w d h m s ms, largest first,
each at most once; a unit may take a fraction, ``2.5m``), or a plain number of seconds (``90``, or ``"90"``
from an environment variable). What is valid in a rule is valid in the config and the other way round.
"""

from __future__ import annotations

import math
import re

UNIT_S = {"y": 31_536_000.0, "w": 604_800.0, "d": 86_400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_ORDER = list(UNIT_S)
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|y|w|d|h|m|s)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: Longer text is not a duration anyone meant (and is not worth scanning).
MAX_CHARS = 40
HINT = "write e.g. 30s, 5m, 1h30m or a number of seconds"


def parse_duration(value: object) -> float:
    """Seconds in ``value``; ValueError (whose message quotes the value and says what to write) otherwise.
    Negative, infinite and NaN durations are refused here; ranges are the caller's to check."""
    if isinstance(value, bool):
        raise ValueError(f"'{value}' is not a duration; {HINT}")
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:
            raise ValueError(f"{str(value)[:20]}... is too large for a duration") from None
    elif isinstance(value, str):
        seconds = _parse_text(value)
    else:
        raise ValueError(f"'{_quoted(value)}' is not a duration; {HINT}")
    if not math.isfinite(seconds):
        raise ValueError(f"a duration must be a finite number of seconds, got {_quoted(value)}")
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {_quoted(value)}")
    return seconds


def _parse_text(value: str) -> float:
    s = value.strip()
    if len(s) > MAX_CHARS or not s:
        raise ValueError(f"'{_quoted(value)}' is not a duration; {HINT}")
    if _NUMBER.fullmatch(s):
        return float(s)
    pos, total, last_unit = 0, 0.0, -1
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        unit = _ORDER.index(m.group(2))
        if unit <= last_unit:
            raise ValueError(f"'{_quoted(value)}' is not a duration: units go largest first, each once "
                             f"(like 1h30m); {HINT}")
        total += float(m.group(1)) * UNIT_S[m.group(2)]
        pos, last_unit = m.end(), unit
    if pos != len(s):
        raise ValueError(f"'{_quoted(value)}' is not a duration; {HINT}")
    return total


def format_duration(seconds: float) -> str:
    """The shortest duration in this grammar for ``seconds`` (``300`` -> ``5m``, ``90`` -> ``1m30s``);
    days are the largest unit written (a week reads better as ``7d`` than ``1w``)."""
    ms = round(seconds * 1000)
    if ms == 0:
        return "0s"
    out = ""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        if ms >= size:
            out += f"{ms // size}{unit}"
            ms %= size
    return out


def _quoted(value: object, limit: int = 60) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
