"""The digest as Markdown, to paste into a chat or a ticket (and what the daemon sends on a schedule).

Owners, commands and rollout names come from processes and pods: every such text is made visible and its
Markdown characters escaped, so a name cannot break a table or add a link. Times are the window's own
(UTC), never the moment of rendering: the same roll-ups give the same bytes.
"""

from __future__ import annotations

import re
import time

from gpuwatch.efficiency.digest import MAX_OWNERS_SHOWN, NOBODY, Digest, OwnerDigest, Usage
from gpuwatch.efficiency.summary import Summary
from gpuwatch.model.durations import format_duration
from gpuwatch.model.rollout import Rollout
from gpuwatch.model.visible import visible

WEEK = 7 * 86400.0
_MARKDOWN = re.compile(r"([\\`*_\[\]<>|~])")


def md(text: object) -> str:
    """Free text (a fix, a summary) made visible, with Markdown's special characters escaped."""
    return _MARKDOWN.sub(r"\\\1", visible(str(text)))


def code(text: object) -> str:
    """A name (an owner, a cause, an image) as a code span: shown as it is, except that a backtick cannot
    end the span and a bar cannot end a table cell."""
    return "`" + visible(str(text)).replace("`", "'").replace("|", "\\|") + "`"


def _h(seconds: float | None) -> str:
    """GPU-hours: two decimals, three below an hour (a short window's causes would all read 0.00)."""
    if seconds is None:
        return "-"
    return f"{seconds / 3600:.2f}" if abs(seconds) >= 3600 else f"{seconds / 3600:.3f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(t))


def _delta(now: float | None, before: float | None, unit: str = "", digits: int = 2) -> str:
    if now is None or before is None:
        return "-"
    d = now - before
    return f"{'+' if d >= 0 else '−'}{abs(d):.{digits}f}{unit}"


def _hours(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 3600


def _before_name(window_s: float) -> str:
    return "the week before" if window_s == WEEK else f"the {format_duration(window_s)} before"


def _owner_name(owner: str) -> str:
    return "(no process: nobody held the GPU)" if owner == NOBODY else code(owner)


def _fleet(d: Digest, before: str) -> list[str]:
    s, p = d.summary, d.previous
    rows = [f"| | this window | {before} | change |", "| --- | ---: | ---: | ---: |"]
    for state in ("allocated", "effective", "lost"):
        now, then = s.funnel[state], None if p is None else p.funnel[state]
        rows.append(f"| {state} GPU-h | {_h(now)} | {_h(then)} | {_delta(_hours(now), _hours(then))} |")
    then_eff = None if p is None else p.efficiency
    rows.append(f"| efficiency | {_pct(s.efficiency)} | {_pct(then_eff)} | "
                f"{_delta(s.efficiency, then_eff, ' pts', 1)} |")
    return rows if p is not None else [*rows, "", f"No data for {before}."]


def _trend(o: OwnerDigest, before: str) -> str:
    if o.before is None:
        return f"no data for {before}"
    parts = [f"lost {_h(o.now.lost)} GPU-h, was {_h(o.before.lost)} "
             f"({_delta(_hours(o.now.lost), _hours(o.before.lost))})"]
    if o.now.efficiency is not None and o.before.efficiency is not None:
        parts.append(f"efficiency {_pct(o.now.efficiency)}, was {_pct(o.before.efficiency)} "
                     f"({_delta(o.now.efficiency, o.before.efficiency, ' pts', 1)})")
    return "; ".join(parts)


def _rollout_line(r: Rollout) -> str:
    where = f"GPU {r.gpu_index}" if r.gpu_index is not None else code(r.gpu)
    text = f"{code(r.before)} → {code(r.after)} on {where}, {_utc(r.judged_at)} UTC: **{r.verdict}**"
    return text + (f" ({md(r.summary)})" if r.summary else "")


def _owner(o: OwnerDigest, s: Summary, before: str) -> list[str]:
    u: Usage = o.now
    causes = ", ".join(f"{code(c)} {_h(v)}" for c, v in o.causes) or "none"
    held = "" if u.allocated is None else f"{_h(u.allocated)} GPU-h allocated, {_pct(u.efficiency)} efficient; "
    lines = [f"### {_owner_name(o.owner)}", "", f"- {held}lost {_h(u.lost)} GPU-h: {causes}"]
    if o.top_cause is not None:
        fix = s.fixes.get(o.top_cause, ("", ""))[1] or "(no fix text recorded)"
        # one line: a wrapped line could start with "- " or "#" and turn into a list item or a heading
        lines.append(f"- Top fix ({code(o.top_cause)}): {md(' '.join(fix.split()))}")
    lines.append(f"- Trend: {_trend(o, before)}")
    if o.rollouts:
        lines.append("- Rollouts: " + "; ".join(_rollout_line(r) for r in o.rollouts))
    return [*lines, ""]


def _owners(d: Digest, before: str, max_owners: int) -> list[str]:
    if not d.owners:
        return ["No owner held a GPU in this window.", ""]
    out = ["| owner | allocated GPU-h | lost GPU-h | efficiency | top cause | lost vs before |",
           "| --- | ---: | ---: | ---: | --- | ---: |"]
    shown = d.owners[:max_owners]
    for o in shown:
        top = code(o.top_cause) if o.top_cause else "-"
        change = _delta(_hours(o.now.lost), None if o.before is None else _hours(o.before.lost))
        out.append(f"| {_owner_name(o.owner)} | {_h(o.now.allocated)} | {_h(o.now.lost)} | "
                   f"{_pct(o.now.efficiency)} | {top} | {change} |")
    if len(d.owners) > len(shown):
        out.append(f"| {len(d.owners) - len(shown)} more owners | | | | | |")
    out.append("")
    for o in shown:
        out += _owner(o, d.summary, before)
    return out


def _consolidation(d: Digest) -> list[str]:
    lines = d.consolidation.lines()
    head = lines[0].removeprefix("Consolidation").lstrip(":, ")
    items = [f"- {md(x.strip().removeprefix('- '))}" for x in lines[1:]]
    return [md(head[:1].upper() + head[1:]), "", *items, *([""] if items else [])]


def render(d: Digest, max_owners: int = MAX_OWNERS_SHOWN) -> str:
    """The digest as one Markdown document (ends with a newline)."""
    s = d.summary
    before = _before_name(d.window_s)
    out = [f"# GPU digest, {_utc(s.since)} to {_utc(s.until)} UTC", "",
           f"{md(s.source)}; {format_duration(d.window_s)} window, compared with {before}.", "",
           *_fleet(d, before), "", "## Owners", "", *_owners(d, before, max_owners),
           "## Consolidation", "", *_consolidation(d), "## Rollouts", ""]
    out += [f"- {code(r.owner)}: {_rollout_line(r)}" for r in d.rollouts] or ["None in this window."]
    return "\n".join(out).rstrip("\n") + "\n"
