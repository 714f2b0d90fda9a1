"""The terminal driver: Textual's own, with an input thread that sleeps until there is input.

Textual's Linux driver reads keys on a thread that wakes every 0.1 s to see whether it should stop and
whether a lone Esc has waited long enough to be a key: ten wake-ups a second, about 0.1 % of a core for a
dashboard that otherwise draws once a second. This driver's thread waits on the terminal and on a pipe
written when the thread must stop, with a timeout only while the key parser waits for the rest of an
escape sequence (the time it has left). Keys, mouse, paste, suspend and resume are Textual's own.

While it owns the terminal, updates carry their colours from one to the next (no reset at the end of each:
:func:`gpuwatch.tui.terminal_cells.carry_pen`); giving the terminal back (quit, suspend) writes the reset.
"""

from __future__ import annotations

import os
import selectors
import threading
from codecs import getincrementaldecoder
from typing import Any

from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.driver import Driver

from gpuwatch.tui.terminal_cells import carry_pen

try:
    from textual.drivers.linux_driver import LinuxDriver
except ImportError:  # no termios: Windows, where Textual's own driver stays
    LinuxDriver = None  # type: ignore[assignment,misc]


class _WakingEvent(threading.Event):
    """An Event whose ``set`` also writes to a pipe, so a thread blocked in ``select`` sees it at once."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        try:
            os.write(self._wake_fd, b"x")
        except OSError:  # closed with the driver, or full of wake-ups nobody read: the flag is set either way
            pass


def driver_class(default: type[Driver]) -> type[Driver]:
    """:class:`QuietLinuxDriver` where Textual would use its Linux driver; ``default`` anywhere else."""
    if LinuxDriver is not None and default is LinuxDriver and hasattr(XTermParser(), "_timeout_time"):
        return QuietLinuxDriver
    return default


if LinuxDriver is not None:

    class QuietLinuxDriver(LinuxDriver):
        """Textual's Linux driver whose input thread blocks until input, a stop or an escape timeout."""

        def __init__(self, app: Any, **kwargs: Any) -> None:
            super().__init__(app, **kwargs)
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_w, False)
            self._waking = _WakingEvent(self._wake_w)
            self.exit_event = self._waking

        def start_application_mode(self) -> None:
            super().start_application_mode()
            carry_pen(True)

        def stop_application_mode(self) -> None:
            reset = carry_pen(False)
            if reset:
                self.write(reset)
            super().stop_application_mode()

        def run_input_thread(self) -> None:
            """What Textual's thread does (read, parse, post each event), without waking when nothing came."""
            parser = XTermParser(self._debug)
            decode = getincrementaldecoder("utf-8")().decode
            selector = selectors.SelectSelector()
            selector.register(self.fileno, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)

            def read_input() -> bool:
                data = decode(os.read(self.fileno, 4096))
                for event in parser.feed(data):
                    self.process_message(event)
                return bool(data)

            try:
                while not self.exit_event.is_set():
                    deadline = parser._timeout_time  # an escape sequence under way: how long to wait for it
                    timeout = None if deadline is None else max(0.0, deadline - get_time())
                    for key, _mask in selector.select(timeout):
                        if key.fd == self._wake_r:
                            os.read(self._wake_r, 512)
                        elif not read_input():  # end of input (stdin piped): only the stop wakes us now
                            selector.unregister(self.fileno)
                    for event in parser.tick():
                        self.process_message(event)
            finally:
                selector.close()
                try:
                    for _event in parser.feed(""):
                        pass
                except (EOFError, ParseError):
                    pass

        def close(self) -> None:
            super().close()
            self._waking._wake_fd = -1  # a later set() writes nowhere, not to a file that reuses the number
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
