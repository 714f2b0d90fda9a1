"""What a blocked call waits for, read from /proc for real. A process asleep in poll, select or epoll: an event
loop asleep on a timer (asyncio.sleep, a select of nothing) can be woken by no other process; a listening
socket or a server's event loop can. A write that sleeps where a read would: what it writes to."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from gpuwatch.model.process_sample import POLL_INPUT, POLL_TIMER
from gpuwatch.sources.blocked_call import is_poll_channel, read_poll_wait, read_write_target
from gpuwatch.sources.procfs import read_wait_channel

ASYNC_SLEEP = "import asyncio\nasync def main():\n    while True: await asyncio.sleep(0.05)\nasyncio.run(main())\n"
SELECT_NOTHING = "import select\nwhile True: select.select([], [], [], 0.05)\n"
LISTENING = ("import selectors, socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
             "sel = selectors.DefaultSelector(); sel.register(s, selectors.EVENT_READ)\n"
             "while True: sel.select(0.05)\n")
ASYNC_SERVER = ("import asyncio\nasync def main():\n    await asyncio.start_server(lambda r, w: None, '127.0.0.1', 0)\n"
                "    while True: await asyncio.sleep(0.05)\nasyncio.run(main())\n")
PIPE_READER = "import sys\nsys.stdin.read()\n"


@pytest.fixture
def polling(request: pytest.FixtureRequest) -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", request.param], stdin=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while not is_poll_channel(read_wait_channel(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)  # it has reached its loop
    yield proc.pid
    proc.kill()
    proc.wait()


def _settled(pid: int) -> str | None:
    """The read once the process sits in its poll (between two polls it may be running)."""
    for _ in range(50):
        got = read_poll_wait(pid)
        if got is not None:
            return got
        time.sleep(0.02)
    return None


@pytest.mark.parametrize("polling", [ASYNC_SLEEP, SELECT_NOTHING], indirect=True)
def test_an_event_loop_or_a_select_asleep_on_a_timer_waits_for_no_one(polling: int) -> None:
    if read_poll_wait(polling) is None and _settled(polling) is None:
        pytest.skip("/proc/PID/task/TID/syscall is not readable here")
    assert _settled(polling) == POLL_TIMER


@pytest.mark.parametrize("polling", [LISTENING, ASYNC_SERVER], indirect=True)
def test_a_listening_socket_in_the_poll_set_is_input(polling: int) -> None:
    if _settled(polling) is None:
        pytest.skip("/proc/PID/task/TID/syscall is not readable here")
    assert _settled(polling) == POLL_INPUT


def test_a_thread_not_in_a_poll_call_gives_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", PIPE_READER], stdin=subprocess.PIPE)
    try:
        time.sleep(0.5)  # blocked in read(0): no poll call
        assert read_poll_wait(proc.pid) is None
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_is_gone_gives_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert read_poll_wait(proc.pid) is None


def test_a_write_blocked_on_a_terminal_names_the_terminal_and_a_blocked_read_names_nothing() -> None:
    master, slave = pty.openpty()
    writer = subprocess.Popen([sys.executable, "-c", "while True: print('x' * 100, flush=True)"], stdout=slave)
    reader = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=slave)
    os.close(slave)
    try:
        deadline = time.monotonic() + 10
        while read_wait_channel(writer.pid) != "wait_woken" and time.monotonic() < deadline:
            time.sleep(0.02)  # the pty's buffer fills: the writer blocks
        target = read_write_target(writer.pid)
        if target is None and not os.access(f"/proc/{writer.pid}/syscall", os.R_OK):
            pytest.skip("/proc/PID/syscall is not readable here")
        assert target is not None and target.startswith("/dev/pts/"), target
        assert read_write_target(reader.pid) is None  # blocked reading the same terminal
    finally:
        for proc in (writer, reader):
            proc.kill()
            proc.wait()
        os.close(master)
