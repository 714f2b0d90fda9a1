"""Number formatting and bars shared by the dashboard's widgets.

Everything here is pure (value in, text out) so widgets stay small and the rendering is deterministic:
no function reads the wall clock; ages are measured against the snapshot's own time.
"""

from __future__ import annotations

from rich.text import Text

BLOCKS = " ▏▎▍▌▋▊▉█"
DASH = "–"


def pct(value: float | None, width: int = 4) -> str:
    """``62%`` right-aligned in ``width`` characters, or a dash."""
    return (DASH if value is None else f"{value:.0f}%").rjust(width)


def num(value: float | None, fmt: str = ".0f", unit: str = "") -> str:
    return DASH if value is None else f"{value:{fmt}}{unit}"


def size(value: float | None) -> str:
    """Bytes as a short human number (binary units): ``750M``, ``112.3G``."""
    if value is None:
        return DASH
    v = float(value)
    for unit in ("B", "K", "M", "G", "T"):
        if abs(v) < 1024 or unit == "T":
            if unit == "B":
                return f"{v:.0f}B"
            return f"{v:.1f}{unit}" if abs(v) < 100 else f"{v:.0f}{unit}"
        v /= 1024
    return f"{v:.0f}T"  # pragma: no cover - loop always returns


def energy(joules: float | None) -> str:
    """Energy as a meter reads it, always with its unit: ``830 Wh``, ``8.3 kWh``, ``1.2 MWh``."""
    if joules is None:
        return DASH
    wh = joules / 3600
    for unit, scale in (("Wh", 1.0), ("kWh", 1e3), ("MWh", 1e6)):
        v = wh / scale
        if abs(v) < 1000 or unit == "MWh":
            return f"{v:.0f} {unit}" if abs(v) >= 100 else f"{v:.1f} {unit}"
    return f"{wh / 1e6:.1f} MWh"  # pragma: no cover - loop always returns


def gib(value: float | None) -> str:
    """Memory in GiB, the one unit every view (and the doctor) gives memory in, the unit said once beside
    it (a column header, ``105/140 GiB``): two or three significant digits, ``105``, ``36``, ``1.1``, ``0.60``."""
    if value is None:
        return DASH
    v = float(value) / 2**30
    if v == 0:
        return "0"
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"


def memory(value: float | None) -> str:
    """``1.1 GiB``: :func:`gib` with its unit, or a dash."""
    return DASH if value is None else f"{gib(value)} GiB"


def rate(value: float | None) -> str:
    """Bytes per second, decimal units as link speeds are quoted: ``1.2GB/s``."""
    if value is None:
        return DASH
    v = float(value)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(v) < 1000 or unit == "GB":
            return f"{v:.0f}{unit}/s" if unit == "B" or abs(v) >= 100 else f"{v:.1f}{unit}/s"
        v /= 1000
    return f"{v:.1f}GB/s"  # pragma: no cover


def bar(fraction: float | None, width: int, style: str, empty_style: str = "dim") -> Text:
    """A horizontal bar of ``width`` cells with eighth-cell resolution; missing values draw an empty bar."""
    width = max(1, width)
    text = Text()
    if fraction is None:
        text.append("·" * width, style=empty_style)
        return text
    f = min(1.0, max(0.0, fraction))
    eighths = round(f * width * 8)
    full, part = divmod(eighths, 8)
    text.append("█" * full, style=style)
    if full < width:
        if part:
            text.append(BLOCKS[part], style=style)
            text.append("·" * (width - full - 1), style=empty_style)
        else:
            text.append("·" * (width - full), style=empty_style)
    return text


def age(seconds: float | None) -> str:
    """An age as ``42s``, ``3m05s``, ``2h10m``."""
    if seconds is None:
        return DASH
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def age_steps(seconds: float | None) -> str:
    """An age that changes a few times a minute: ``age`` of the seconds rounded down to 5 s under a minute,
    to 10 s under ten minutes, to whole minutes after (``40s``, ``3m10s``, ``42m00s``, ``2h10m``). An
    alert's FOR column ticking every second rewrote its cells every second for no decision it changes."""
    if seconds is None:
        return DASH
    s = max(0, int(seconds))
    step = 5 if s < 60 else 10 if s < 600 else 60
    return age(s - s % step)


def clock(t: float) -> str:
    """The snapshot's time of day in UTC, so screenshots and tests do not depend on the local zone."""
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
