"""How ``gpuwatch report`` reads: text tables, CSV rows and the per-hour chart."""

from __future__ import annotations

import textwrap
import time
from typing import Any

from gpuwatch.efficiency.summary import Summary

HOUR = 3600.0


def hours(seconds: float) -> str:
    """GPU-hours with three decimals, and minutes beside them below an hour (short recordings)."""
    text = f"{seconds / HOUR:.3f} GPU-h"
    return f"{text} ({seconds / 60:.1f} min)" if seconds < HOUR else text


def _utc(t: float, fmt: str = "%Y-%m-%d %H:%M") -> str:
    return time.strftime(fmt, time.gmtime(t))


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f} %" if whole > 0 else "    - "


def render_text(s: Summary, by: str | None = None) -> str:
    lines = [f"GPU efficiency {_utc(s.since)} to {_utc(s.until)} UTC, {s.source} (hourly roll-ups)", ""]
    observed = s.funnel["observed"]
    for state in ("observed", "allocated", "busy", "effective", "lost"):
        lines.append(f"  {state:<10} {hours(s.funnel[state]):>26}  {_pct(s.funnel[state], observed)}")
    eff = s.efficiency
    if eff is not None:
        lines.append(f"  efficiency (effective / allocated): {eff:.1f} %")
    for name in (by,) if by else ("cause", "owner"):
        rows = s.lost[name]
        lines += ["", f"Lost GPU-hours by {name}"]
        if not rows:
            lines.append("  none")
        width = max((len(k) for k, _ in rows), default=0)
        for key, seconds in rows:
            label = _utc(float(key), "%m-%d %H:00") if name == "hour" else key
            lines.append(f"  {label:<{max(width, 11)}} {hours(seconds):>26}  {_pct(seconds, s.funnel['lost'])}")
    top = s.top_fix
    if top is not None:
        cause, seconds, fix = top
        lines += ["", f"Top fix, for the biggest loss ({cause}, {hours(seconds)}):"]
        lines += textwrap.wrap(fix or "(no fix text recorded)", 100, initial_indent="  ", subsequent_indent="  ")
    if s.headroom is not None:
        lines += ["", s.headroom.line]
    return "\n".join(lines)


def render_csv(s: Summary, by: str, writer: Any) -> None:
    writer.writerow([by, "lost_gpu_hours", "share_of_lost"])
    for key, seconds in s.lost[by]:
        share = seconds / s.funnel["lost"] if s.funnel["lost"] > 0 else 0.0
        writer.writerow([key, f"{seconds / HOUR:.6f}", f"{share:.4f}"])


def chart(s: Summary, width: int | None = None) -> str:
    from gpuwatch.cli.charts import Panel, render

    labels = [_utc(r.hour, "%d %H:00") for r in s.hours]
    efficiency = [100.0 * r.effective / r.allocated if r.allocated > 0 else 0.0 for r in s.hours]
    lost = [r.lost / HOUR for r in s.hours]
    return render([Panel("efficiency per hour (effective / allocated, %)", labels, {"efficiency": efficiency},
                         bars=True, ylim=(0, 100)),
                   Panel("lost GPU-hours per hour", labels, {"lost": lost}, bars=True)], width)
