"""Value parsers for the config file and ``GPUWATCH_*`` environment overrides.

Each parser takes the raw TOML (or environment string) value and returns the typed value, or raises
:class:`FieldError` with a sentence that says what was expected; the loader adds file, line and key.
"""

from __future__ import annotations

import ipaddress
import math
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

from gpuwatch.model.durations import format_duration, parse_duration
from gpuwatch.model.interval import MAX_INTERVAL_S, MIN_INTERVAL_S
from gpuwatch.model.visible import visible

#: C0 and C1 controls and DEL (tabs and newlines included): no config value is more than one line of text.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class FieldError(ValueError):
    """A value of the wrong shape; the message says what a good one looks like."""


def shown(value: Any, limit: int = 60) -> str:
    """``value`` as an error message quotes it: never more than ``limit`` characters, whatever was given."""
    text = visible(value if isinstance(value, str) else repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def duration(value: Any) -> float:
    """Seconds from a number or a duration such as ``"30s"``, ``"5m"``, ``"1h30m"`` (the rules' grammar)."""
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise FieldError(str(exc)) from None


def duration_between(minimum: float, maximum: float) -> Callable[[Any], float]:
    """A duration parser that also refuses values outside [minimum, maximum] (zero timeouts, no back-off)."""

    def parse(value: Any) -> float:
        seconds = duration(value)
        if not minimum <= seconds <= maximum:
            raise FieldError(f"must be between {format_duration(minimum)} and {format_duration(maximum)}, "
                             f"got {shown(value)}")
        return seconds

    return parse


def positive_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise FieldError(f"expected a number, got {shown(value)}")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise FieldError(f"'{shown(value)}' is not a number") from None
    if not math.isfinite(number):
        raise FieldError(f"must be a finite number, got {shown(value)}")
    if number <= 0:
        raise FieldError(f"must be greater than 0, got {shown(value)}")
    return number


def float_between(minimum: float, maximum: float) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        number = positive_float(value)
        if not minimum <= number <= maximum:
            raise FieldError(f"must be between {minimum:g} and {maximum:g}, got {shown(value)}")
        return number

    return parse


def positive_int(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 18:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FieldError(f"expected a whole number of 1 or more, got {shown(value)}")
    return value


def int_between(minimum: int, maximum: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        number = positive_int(value)
        if not minimum <= number <= maximum:
            raise FieldError(f"must be between {minimum} and {maximum}, got {shown(value)}")
        return number

    return parse


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise FieldError(f"expected true or false, got {shown(value)}")


def text(value: Any) -> str:
    """A non-empty string without control characters: a CR/LF in a URL would be dropped or rewritten by the
    HTTP library (a request sent somewhere else than the file says), and an ESC in a name would steer the
    terminal of whoever reads the log. Surrounding spaces are trimmed; nothing else is changed."""
    if not isinstance(value, str) or not value.strip():
        raise FieldError(f"expected a non-empty string, got {shown(value)}")
    _no_control(value)
    return value.strip()


def _no_control(value: str) -> None:
    bad = _CONTROL.search(value)
    if bad is not None:
        raise FieldError(f"'{shown(value)}' holds a control character ({visible(bad.group(0))} at character "
                         f"{bad.start() + 1}); write it on one line of plain text")


def text_list(value: Any) -> list[str]:
    """A TOML array of strings, or (from the environment) a comma-separated string."""
    if isinstance(value, str):
        _no_control(value)
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        for v in value:
            _no_control(v)
        return list(value)
    raise FieldError(f"expected a list of strings such as [\"a\", \"b\"], got {shown(value)}")


def url(value: Any) -> str:
    s = text(value)
    if not re.match(r"^https?://[^/\s]+", s):
        raise FieldError(f"'{shown(s)}' is not an http:// or https:// URL")
    try:  # parsed now, not at the first delivery: a port of 99999 or a broken [IPv6] is a config error
        parts = urllib.parse.urlsplit(s)
        parts.port  # noqa: B018 - reading it is the check
    except ValueError as exc:
        raise FieldError(f"'{shown(s)}' is not a usable URL ({str(exc)[:80]})") from None
    if not parts.hostname:
        raise FieldError(f"'{shown(s)}' names no host")
    return s


def listen_address(value: Any) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:19464`` for IPv6) -> (host, port)."""
    s = text(value)
    # At most 5 digits: a longer run is no port, and int() of thousands of digits raises ValueError.
    m = re.match(r"^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$", s) or re.match(r"^([^:\s]+):(\d{1,5})$", s)
    if not m or not 0 <= int(m.group(2)) < 65536:  # port 0: the system picks a free one
        raise FieldError(f"'{shown(s)}' is not HOST:PORT; write e.g. \"127.0.0.1:19464\"")
    return m.group(1), int(m.group(2))


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def string_map(value: Any) -> dict[str, str]:
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        for k, v in value.items():
            _no_control(k)
            _no_control(v)
        return dict(value)
    raise FieldError(f"expected a table of strings such as {{ severity = \"critical\" }}, got {shown(value)}")


def one_of(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in choices:
            raise FieldError(f"'{shown(value)}' is not one of: {', '.join(choices)}")
        return str(value)

    return parse


def listen_text(value: Any) -> str:
    """A ``HOST:PORT`` string, checked now so a typo fails at start, not at bind time."""
    listen_address(value)
    return text(value)


def sampling_interval(value: Any) -> float:
    """Seconds between samples, within the bounds of ``model/interval.py`` (the config file and --interval)."""
    return float_between(MIN_INTERVAL_S, MAX_INTERVAL_S)(value)


DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_TIME = re.compile(r"(?:(?P<day>[a-z]{3})\s+)?(?P<h>\d{1,2}):(?P<m>\d{2})")


def day_time_offset(value: str) -> tuple[int | None, float]:
    """``"mon 09:00"`` or ``"09:00"`` (UTC) as (weekday, Monday 0, or None; seconds into that day)."""
    m = _DAY_TIME.fullmatch(value.strip().lower())
    if m is None or int(m["h"]) > 23 or int(m["m"]) > 59 or (m["day"] and m["day"] not in DAYS):
        raise FieldError(f"expected a UTC time such as \"09:00\" or a weekday and time such as \"mon 09:00\", "
                         f"got {shown(value)}")
    return (DAYS.index(m["day"]) if m["day"] else None), int(m["h"]) * 3600.0 + int(m["m"]) * 60.0


def day_time(value: Any) -> str:
    """A schedule's time of day, with an optional weekday: ``"mon 09:00"``, ``"09:00"`` (UTC); ``""``: none."""
    if value == "":
        return ""
    day_time_offset(text(value))
    return text(value).lower()
