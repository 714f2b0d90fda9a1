"""What a partial screen update writes to the terminal: only the cells that changed, in few escape codes.

Textual turns the regions widgets refresh into spans per screen line and writes each span. It writes
every span from the left edge of the widget it falls in (its own note says "crop to x extents"), so a
number that changed at the right of a 160-column line resent the whole line, and it wraps every segment
in its own colour code and reset, even when the next segment has the same colours. At one tick a second
the dashboard wrote ~3 kB/s where nvitop (curses) writes ~0.3 kB/s.

:func:`install` replaces Textual's partial-update writer with one that writes each span from its first
cell and emits a colour code only where the style changes. The screen the terminal shows is the same
(tests compare a real terminal's screen, tmux's, with the app's own render). Textual's full-screen
redraws (start-up, resize) are untouched.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.color import ColorSystem
from rich.console import Console
from rich.control import Control
from rich.segment import Segment
from rich.style import Style
from textual import _compositor
from textual.strip import Strip

_ORIGINAL = getattr(_compositor.ChopsUpdate, "render_segments", None)


def render_spans(update: _compositor.ChopsUpdate, console: Console) -> str:
    """The terminal sequence for ``update`` (a :class:`textual._compositor.ChopsUpdate`)."""
    color_system = console._color_system or ColorSystem.TRUECOLOR
    out: list[str] = []
    chops, chop_ends = update.chops, update.chop_ends
    last_y = update.spans[-1][0]
    for y, x1, x2 in update.spans:
        for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
            if strip is None or x >= x2 or end <= x1:
                continue
            start, stop = max(x, x1), min(end, x2)
            if start != x or stop != end:
                strip = strip.crop(start - x, stop - x)
            out.append(Control.move_to(start, y).segment.text)
            out.append(styled(strip, color_system))
        if y != last_y:
            out.append("\n")
    return "".join(out)


def styled(segments: Iterable[Segment], color_system: ColorSystem) -> str:
    """Segments as text with one SGR code per change of style (reset and set in one code), reset at the
    end; what Textual writes as ``code text reset`` per segment."""
    out: list[str] = []
    current: Style | None = None
    open_codes = False
    for text, style, _control in segments:
        if not text:
            continue
        if style is None or style._link:  # hyperlinks keep Textual's own rendering (OSC 8 around the text)
            if open_codes:
                out.append("\x1b[0m")
                open_codes, current = False, None
            out.append(text if style is None else Strip.render_style(style, text, color_system))
            continue
        if style != current:
            ansi = style._ansi if style._ansi is not None else Strip.render_ansi(style, color_system)
            if ansi:
                out.append(f"\x1b[0;{ansi}m")
                open_codes = True
            elif open_codes:
                out.append("\x1b[0m")
                open_codes = False
            current = style
        out.append(text)
    if open_codes:
        out.append("\x1b[0m")
    return "".join(out)


def install() -> bool:
    """Use :func:`render_spans` for Textual's partial updates; ``False`` (Textual's own writer stays) when
    this Textual's update object is not the shape this module knows."""
    cls = getattr(_compositor, "ChopsUpdate", None)
    if cls is None or _ORIGINAL is None or not {"chops", "spans", "chop_ends"} <= set(
            cls.__init__.__code__.co_varnames):
        return False
    setattr(cls, "render_segments", render_spans)  # noqa: B010 (mypy refuses assigning a method)
    return True


def uninstall() -> None:
    """Textual's own writer again (tests compare the two)."""
    if _ORIGINAL is not None:
        setattr(_compositor.ChopsUpdate, "render_segments", _ORIGINAL)  # noqa: B010
