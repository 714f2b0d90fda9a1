"""What a process asleep in poll, select or epoll waits for, read from /proc for real: an event loop asleep on a
timer (asyncio.sleep, a select of nothing) can be woken by no other process; a listening socket or a server's
event loop can."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from gpuwatch.model.process_sample import POLL_INPUT, POLL_TIMER
from gpuwatch.sources.poll_wait import is_poll_channel, read_poll_wait
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
