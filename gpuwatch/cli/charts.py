"""One-shot terminal charts with plotext, for ``report`` and ``compare`` (the dashboard keeps its own,
cheaper renderer). Charts are drawn only when stdout is a terminal; pipes and files get plain text."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field

import plotext as plt


@dataclass(frozen=True)
class Panel:
    """One chart: a title, x values (numbers, or labels for bars) and named y series."""

    title: str
    x: Sequence[float] | Sequence[str]
    series: dict[str, Sequence[float]] = field(default_factory=dict)
    bars: bool = False
    ylabel: str = ""
    #: Fixed y range (two runs drawn one above the other read alike on the same scale).
    ylim: tuple[float, float] | None = None


def render(panels: Sequence[Panel], width: int | None = None, panel_height: int = 12) -> str:
    """The panels drawn one above the other, as text with colour codes."""
    width = width or min(120, shutil.get_terminal_size((100, 40)).columns)
    plt.clf()
    plt.subplots(len(panels), 1)
    for i, panel in enumerate(panels, start=1):
        plt.subplot(i, 1)
        plt.plotsize(width, panel_height)  # each subplot's own size and theme: the figure's go to the last one
        plt.theme("pro")
        plt.title(panel.title)
        if panel.ylim is not None:
            plt.ylim(*panel.ylim)
        for name, ys in panel.series.items():
            if panel.bars:
                plt.bar(list(panel.x), list(ys), label=name)
            else:
                plt.plot(list(panel.x), list(ys), label=name)
        if panel.ylabel:
            plt.ylabel(panel.ylabel)
    return str(plt.build())
