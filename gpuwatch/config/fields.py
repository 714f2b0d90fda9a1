"""Value parsers for the config file and ``GPUWATCH_*`` environment overrides.

Each parser takes the raw TOML (or environment string) value and returns the typed value, or raises
:class:`FieldError` with a sentence that says what was expected; the loader adds file, line and key.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any


class FieldError(ValueError):
    """A value of the wrong shape; the message says what a good one looks like."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def duration(value: Any) -> float:
    """Seconds from a number (seconds) or a string like ``"30s"``, ``"5m"``, ``"4h"``, ``"1d"``."""
    if isinstance(value, bool):
        raise FieldError("expected a duration such as 30 (seconds), \"30s\", \"5m\" or \"4h\"")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        raise FieldError(f"'{value}' is not a duration; write e.g. 30 (seconds), \"30s\", \"5m\" or \"4h\"")
    if seconds < 0:
        raise FieldError(f"a duration cannot be negative, got {value}")
    return seconds


def positive_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise FieldError(f"expected a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise FieldError(f"'{value}' is not a number") from None
    if number <= 0:
        raise FieldError(f"must be greater than 0, got {value}")
    return number


def positive_int(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FieldError(f"expected a whole number of 1 or more, got {value!r}")
    return value


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.strip().lower() in ("1", "true", "yes", "on")
    raise FieldError(f"expected true or false, got {value!r}")


def text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise FieldError(f"expected a non-empty string, got {value!r}")
    return value.strip()


def text_list(value: Any) -> list[str]:
    """A TOML array of strings, or (from the environment) a comma-separated string."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise FieldError(f"expected a list of strings such as [\"a\", \"b\"], got {value!r}")


def url(value: Any) -> str:
    s = text(value)
    if not re.match(r"^https?://[^/\s]+", s):
        raise FieldError(f"'{s}' is not an http:// or https:// URL")
    return s


def listen_address(value: Any) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9464`` for IPv6) -> (host, port)."""
    s = text(value)
    m = re.match(r"^\[([0-9a-fA-F:.]+)\]:(\d+)$", s) or re.match(r"^([^:\s]+):(\d+)$", s)
    if not m or not 0 <= int(m.group(2)) < 65536:  # port 0: the system picks a free one
        raise FieldError(f"'{s}' is not HOST:PORT; write e.g. \"127.0.0.1:9464\"")
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
        return dict(value)
    raise FieldError(f"expected a table of strings such as {{ severity = \"critical\" }}, got {value!r}")


def one_of(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in choices:
            raise FieldError(f"'{value}' is not one of: {', '.join(choices)}")
        return str(value)

    return parse


def listen_text(value: Any) -> str:
    """A ``HOST:PORT`` string, checked now so a typo fails at start, not at bind time."""
    listen_address(value)
    return text(value)
