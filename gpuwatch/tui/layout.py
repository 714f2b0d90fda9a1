"""How the rows under the GPU panel are shared: space goes to what has content.

A fixed split wastes the screen both ways: at 160x50 a two-process table sat on ~22 empty rows while the
alerts pane cut its summaries and the diagnosis scrolled; at 80x24 the alerts pane showed 2 of 3 alerts.
So the process table takes the rows it has (header plus one per process), the alerts pane the rows its
alerts need, and the diagnosis what is left. Where everything fits at full width, alerts sit above the
diagnosis (their summaries need the width); where it does not, they stay stacked if that shows as large a
share of the findings as side by side would, else the two sit side by side under the table; a long
process list keeps at least a third of the rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

#: Rows a bordered pane spends on its border.
BORDER = 2
#: Fewest rows the panes under the table keep when the table is long (border, header, two rows).
BOTTOM_MIN = 6
#: Fewest rows the table keeps (header and two processes).
PROCS_MIN = 3
#: Fewest diagnosis lines worth stacking the panes for when the findings do not fit anyway.
DIAGNOSIS_MIN = 5
#: Spare rows the GPU panel row takes first: the panel's host and "more" lines. Where the history plot is
#: on screen it takes half the spare rows (at most TOP_GROW_PLOT): the plot is what gains from height.
TOP_GROW = 4
TOP_GROW_PLOT = 16
#: Seconds the findings must need fewer rows before the panes give those rows back. A layout change moves
#: every pane and repaints the whole terminal (~30 KB at 160x50); live findings that come and go every few
#: seconds did that four times a minute on the H200, and still twice a minute with a 30 s wait. A pane
#: with blank rows costs nothing.
SHRINK_AFTER_S = 300.0


@dataclass(frozen=True)
class Plan:
    """Heights in rows: the process table, the alerts pane and the diagnosis pane; ``stacked``: alerts
    above the diagnosis at full width, else side by side (then both have ``alerts`` rows)."""

    procs: int
    alerts: int
    diagnosis: int
    stacked: bool
    top_extra: int = 0
    #: Rows the diagnosis pane needs to show every finding (border included): what :func:`settle` weighs.
    diagnosis_need: int = field(default=0, compare=False)

    @property
    def bottom(self) -> int:
        return self.alerts + self.diagnosis if self.stacked else self.alerts


def plan(rows: int, width: int, process_rows: int, alert_rows: int,
         diagnosis_lines: Callable[[int], int], plot_shown: bool = False) -> Plan:
    """Share ``rows`` (what is left under the GPU panel, above the footer) for a terminal ``width`` wide.

    ``diagnosis_lines(w)`` is how many lines the findings take wrapped to a pane ``w`` cells wide."""
    procs_need = 1 + max(1, process_rows)
    alerts_need = BORDER + 1 + max(1, alert_rows)
    stacked_need = procs_need + alerts_need + BORDER + diagnosis_lines(width)
    if stacked_need <= rows:
        spare = rows - stacked_need
        extra = min(spare, max(TOP_GROW, min(TOP_GROW_PLOT, spare // 2)) if plot_shown else TOP_GROW)
        return Plan(procs_need, alerts_need, rows - extra - procs_need - alerts_need, stacked=True, top_extra=extra,
                    diagnosis_need=BORDER + diagnosis_lines(width))
    side_lines = diagnosis_lines(width // 2)
    stacked_rows = rows - procs_need - alerts_need - BORDER  # diagnosis lines on screen if stacked anyway
    if stacked_rows >= DIAGNOSIS_MIN and stacked_rows / max(1, diagnosis_lines(width)) >= (
            rows - procs_need - BORDER) / max(1, side_lines):
        return Plan(procs_need, alerts_need, rows - procs_need - alerts_need, stacked=True,
                    diagnosis_need=BORDER + diagnosis_lines(width))
    bottom_need = max(alerts_need, BORDER + side_lines)
    if procs_need + bottom_need <= rows:
        procs = procs_need
    else:
        procs_floor = min(procs_need, max(PROCS_MIN, rows // 3))
        bottom = max(min(bottom_need, rows - procs_floor), min(BOTTOM_MIN, rows - PROCS_MIN))
        procs = rows - bottom
    procs = max(1, procs)
    bottom = max(0, rows - procs)
    return Plan(procs, bottom, bottom, stacked=False, diagnosis_need=BORDER + side_lines)


def settle(current: Plan | None, new: Plan, shrinking_since: float | None, now: float) -> tuple[Plan, float | None]:
    """The plan to show after the findings changed, and since when they have needed fewer rows: ``new`` at
    once when they need more rows than their pane has (or anything else moved), ``current`` while they
    still fit in it (the GPU panel does not give up rows it holds to findings that fit without them), and
    ``current`` until a smaller diagnosis has lasted SHRINK_AFTER_S (its pane keeps some blank rows)."""
    if current is None or (new.procs, new.alerts, new.stacked) != (current.procs, current.alerts, current.stacked):
        return new, None
    if new.diagnosis > current.diagnosis:
        return (current, None) if new.diagnosis_need <= current.diagnosis else (new, None)
    if new.diagnosis == current.diagnosis:
        return new, None
    since = now if shrinking_since is None else shrinking_since  # new.diagnosis < current.diagnosis
    return (new, None) if now - since >= SHRINK_AFTER_S else (current, since)
