"""Annotation templates: the part of Prometheus' Go templates that alert text needs, rendered the same way
here and on Prometheus.

Supported: ``{{ $labels.NAME }}`` and ``{{ $value }}``. ``$value`` is shown humanised in the metric's unit
("12.5%", "80GiB", "1.98GHz"; an XID code with its meaning, "79 (GPU fallen off the bus)"); on export it
becomes the Go pipeline that prints the same text from the exporter's base-unit value
(``{{ $value | humanizePercentage }}``, ``{{ $value | humanize1024 }}B``, an ``if eq $value ...`` chain over
the XID table...).
The number formatting below mirrors Prometheus' ``humanize*`` functions (``%.4g`` with SI/IEC prefixes).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpuwatch.model.xid import XID_MEANINGS

_FIELD = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}")
_LABEL = re.compile(r"^\$labels\.([A-Za-z_][A-Za-z0-9_]*)$")


@dataclass(frozen=True)
class ValueUnit:
    """The unit of a rule's ``$value`` and the factor to the exporter's base unit."""

    unit: str = ""
    scale: float = 1.0
    #: False where Prometheus has no equivalent value (a stale source's age).
    exportable: bool = True


#: Longest annotation or label text accepted (alert text is a sentence or two).
MAX_TEMPLATE = 4096


def check_template(text: str) -> str | None:
    """None when ``text`` only uses supported fields, else what is wrong. One pass, left to right: a regex
    here would rescan the rest of the text for every unclosed ``{{`` (quadratic)."""
    if len(text) > MAX_TEMPLATE:
        return f"{len(text)} characters is too long (the limit is {MAX_TEMPLATE})"
    pos = 0
    while (start := text.find("{{", pos)) != -1:
        end = text.find("}}", start + 2)
        if end == -1 or text.find("{{", start + 2, end) != -1:
            return "unbalanced '{{' in template"
        inner = text[start + 2:end]
        inner = inner[1:] if inner.startswith("-") else inner
        inner = inner[:-1] if inner.endswith("-") else inner
        expr = inner.strip()
        if "\n" in inner or (expr != "$value" and not _LABEL.match(expr)):
            return (f"unsupported template field '{{{{ {expr[:60]} }}}}': use {{{{ $labels.NAME }}}} "
                    f"or {{{{ $value }}}}")
        pos = end + 2
    return None


def render(text: str, labels: dict[str, str], value: float | None, unit: ValueUnit) -> str:
    """The annotation for one alert; a missing label renders empty, as in Prometheus."""

    def field(m: re.Match[str]) -> str:
        expr = m.group(1)
        if expr == "$value":
            return format_value(value, unit)
        lm = _LABEL.match(expr)
        return labels.get(lm.group(1), "") if lm else m.group(0)

    return _FIELD.sub(field, text)


def to_go(text: str, unit: ValueUnit) -> str:
    """The same template for Prometheus, where ``$value`` is in the exporter's base unit."""
    pipeline, suffix = _go_pipeline(unit)
    return _FIELD.sub(lambda m: f"{{{{ {pipeline} }}}}{suffix}" if m.group(1) == "$value"
                      else f"{{{{ {m.group(1)} }}}}", text)


def _go_pipeline(unit: ValueUnit) -> tuple[str, str]:
    if unit.unit == "percent":
        return "$value | humanizePercentage", ""
    if unit.unit in ("bytes", "bytes/s"):
        return "$value | humanize1024", "B" + unit.unit[5:]
    if unit.unit == "MHz":
        return "$value | humanize", "Hz"
    if unit.unit == "xid":
        chain = "{{ else if ".join(f'eq $value {code}.0 }}}} ({meaning})' for code, meaning in XID_MEANINGS.items())
        return '$value | printf "%.0f"', f"{{{{ if {chain}{{{{ end }}}}"
    return '$value | printf "%.4g"', _suffix(unit.unit)


def _suffix(unit: str) -> str:
    return {"celsius": "°C", "watts": "W", "joules": "J", "seconds": "s", "": ""}.get(unit, " " + unit)


def format_value(value: float | None, unit: ValueUnit) -> str:
    if value is None:
        return ""
    base = value * unit.scale
    if unit.unit == "percent":
        return humanize_percentage(base)
    if unit.unit in ("bytes", "bytes/s"):
        return humanize1024(base) + "B" + unit.unit[5:]
    if unit.unit == "MHz":
        return humanize(base) + "Hz"
    if unit.unit == "xid":
        meaning = XID_MEANINGS.get(int(base)) if base.is_integer() else None
        return f"{base:.0f}" + (f" ({meaning})" if meaning else "")
    return go_g(base) + _suffix(unit.unit)


def go_g(v: float) -> str:
    """Go's ``%.4g`` (the same as Python's, spelled out for NaN and infinities)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return f"{v:.4g}"


def humanize(v: float) -> str:
    if v == 0 or math.isnan(v) or math.isinf(v):
        return go_g(v)
    prefix = ""
    if abs(v) >= 1:
        for p in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(v) < 1000:
                break
            prefix, v = p, v / 1000
        return go_g(v) + prefix
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return go_g(v) + prefix


def humanize1024(v: float) -> str:
    if abs(v) <= 1 or math.isnan(v) or math.isinf(v):
        return go_g(v)
    prefix = ""
    for p in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(v) < 1024:
            break
        prefix, v = p, v / 1024
    return go_g(v) + prefix


def humanize_percentage(v: float) -> str:
    return go_g(v * 100) + "%"
