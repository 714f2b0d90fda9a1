"""The terminal driver's input thread: it sleeps until a key comes (no wake-ups ten times a second), a lone
Esc still arrives once the escape delay has passed, and a stop wakes it at once. Checked on a real pty
with Textual's own key parser; the dashboard's keys end to end are in test_tmux.py and test_quit_keys.py."""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import threading
import time
import tty
from collections.abc import Iterator
from typing import Any

import pytest
from textual import events
from textual.drivers.linux_driver import LinuxDriver

from gpuwatch.tui.driver import QuietLinuxDriver, driver_class


class _App:
    """The driver's app: it posts nothing to it here (the messages are collected)."""


@pytest.fixture
def driver() -> Iterator[tuple[QuietLinuxDriver, int, list[Any], threading.Thread]]:
    handlers = signal.getsignal(signal.SIGTSTP), signal.getsignal(signal.SIGCONT)
    master, slave = os.openpty()
    tty.setraw(slave)  # as Textual sets the terminal: keys arrive one by one, not a line at a time
    async def build() -> QuietLinuxDriver:  # a driver is made on the app's event loop
        return QuietLinuxDriver(_App())  # type: ignore[arg-type]

    loop = asyncio.new_event_loop()
    drv = loop.run_until_complete(build())
    drv.fileno = slave
    got: list[Any] = []
    drv.process_message = got.append  # type: ignore[method-assign]
    thread = threading.Thread(target=drv.run_input_thread, daemon=True)
    try:
        yield drv, master, got, thread
    finally:
        drv.exit_event.set()
        if thread.is_alive():
            thread.join(2.0)
        drv.close()
        os.close(master)
        os.close(slave)
        signal.signal(signal.SIGTSTP, handlers[0])
        signal.signal(signal.SIGCONT, handlers[1])
        loop.close()


def _keys(got: list[Any]) -> list[str]:
    return [m.key for m in got if isinstance(m, events.Key)]


def _wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_textuals_linux_driver_is_replaced_and_no_other() -> None:
    assert driver_class(LinuxDriver) is QuietLinuxDriver
    from textual.drivers.headless_driver import HeadlessDriver

    assert driver_class(HeadlessDriver) is HeadlessDriver


def test_the_input_thread_sleeps_until_a_key_comes_and_stops_when_told(
        driver: tuple[QuietLinuxDriver, int, list[Any], threading.Thread], monkeypatch: pytest.MonkeyPatch) -> None:
    drv, master, got, thread = driver
    waits: list[float | None] = []
    select = selectors.SelectSelector.select

    def counted(self: selectors.SelectSelector, timeout: float | None = None) -> Any:
        waits.append(timeout)
        return select(self, timeout)

    monkeypatch.setattr(selectors.SelectSelector, "select", counted)
    thread.start()
    time.sleep(0.6)  # Textual's own thread would have woken six times by now
    assert waits == [None]
    os.write(master, b"a")
    _wait_for(lambda: _keys(got) == ["a"])
    os.write(master, b"\x1b")  # a lone Esc: a key once the parser has waited for the rest of a sequence
    _wait_for(lambda: _keys(got) == ["a", "escape"])
    assert any(w is not None and w > 0 for w in waits)  # it waited for the escape delay, not forever
    assert waits[-1] is None  # ...and sleeps again
    drv.exit_event.set()
    thread.join(2.0)
    assert not thread.is_alive()
