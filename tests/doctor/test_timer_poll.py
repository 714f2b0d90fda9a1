"""An event loop asleep on a timer (``await asyncio.sleep`` between batches, a select of nothing) sits in the
same kernel wait channel as a server awaiting requests. For real: the host source reads what the poll waits
on, and the doctor says a timed sleep, never "waiting for input" nor an idle server. Synthetic windows for the
stacks: their selector frames are read as a sleep only when the kernel says nothing could wake the poll."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator

import pytest
from processes import python_child

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.attribution import time_split
from gpuwatch.doctor.window import summarise
from gpuwatch.model.process_sample import POLL_INPUT, POLL_TIMER
from gpuwatch.model.snapshot import Snapshot

from .live import on_idle_gpu
from .synthetic import STDLIB, Load, native, py, thread, window

BATCHER = ("import asyncio\nprint('ready', flush=True)\nasync def batch_loop():\n    while True:\n"
           "        sum(i * i for i in range(2000))\n        await asyncio.sleep(0.05)\nasyncio.run(batch_loop())\n")


@pytest.fixture
def batcher() -> Iterator[subprocess.Popen[str]]:
    with python_child(BATCHER) as proc:
        yield proc


def test_an_event_loop_asleep_on_a_timer_is_in_a_timed_sleep_not_waiting_for_input(
        batcher: subprocess.Popen[str]) -> None:
    snaps = on_idle_gpu(batcher.pid, polls=6, every_s=0.3)
    if all(p.poll_wait is None for s in snaps for p in s.processes):
        pytest.skip("/proc/PID/task/TID/syscall is not readable here")
    p = summarise(snaps)[0].processes[0]
    assert p.poll_timer_share == 1.0
    split = time_split(p)
    assert split.get("sleep", 0.0) > 50.0 and split.get("input", 0.0) == 0.0, split
    findings = diagnose(snaps)
    f = top_problem(findings)
    assert f is not None and "in a timed sleep" in f.title and "input" not in f.title, f
    assert "demand_bound" not in [x.code for x in findings]
    assert any("a timer ends the wait" in e for e in f.evidence), f.evidence


#: The event loop's frames in epoll, as py-spy shows them (the coroutine that awaits is suspended: not shown).
EPOLL = thread(native("libc.so.6", "epoll_wait"), py(f"{STDLIB}/selectors.py", "EpollSelector.select"),
               py(f"{STDLIB}/asyncio/base_events.py", "BaseEventLoop._run_once"),
               py(f"{STDLIB}/asyncio/base_events.py", "BaseEventLoop.run_forever"), py("serve.py", "<module>"),
               idle=True, count=20)


def _polling(poll_wait: str) -> list[Snapshot]:
    """As the host source gives it: the main thread's wait class is read with what its poll waits for; a
    batcher on a timer has no socket to the outside (its work comes from its own tree)."""
    timer = poll_wait == POLL_TIMER
    snaps = window(Load(util=5.0, sm=3.0, thread=2.0, waits=("sleep" if timer else "input",), channel="ep_poll",
                        stacks=(EPOLL,), upstream="tree" if timer else None))
    return [dataclasses.replace(s, processes=tuple(dataclasses.replace(p, poll_wait=poll_wait)
                                                   for p in s.processes)) for s in snaps]


def test_selector_frames_are_a_sleep_when_nothing_could_wake_the_poll() -> None:
    f = top_problem(diagnose(_polling(POLL_TIMER)))
    assert f is not None and f.mechanism == "sleep" and "in a timed sleep" in f.title, f


def test_selector_frames_stay_a_wait_for_input_when_input_could_come() -> None:
    findings = diagnose(_polling(POLL_INPUT))
    assert all(f.mechanism != "sleep" for f in findings), [(f.code, f.mechanism) for f in findings]
    assert any(f.mechanism == "input" for f in findings), [(f.code, f.mechanism) for f in findings]
