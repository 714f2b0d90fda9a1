"""``k``: signals go only to processes this user may signal, only in live mode, and only after 'yes'.

The processes are real children of the test, listed as GPU processes by a live-looking producer."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import live_app, replay_app
from pilot_wait import wait_for

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.tui import signals
from gpuwatch.tui.status import kill_refusal
from gpuwatch.tui.widgets.kill_dialog import KillDialog
from gpuwatch.tui.widgets.process_table import ProcessTable

SIZE = (160, 50)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A sleeping child, once it runs: Popen returns when the exec begins, before the kernel has set up the new
    program's command line (read then, /proc/PID/cmdline is empty)."""
    proc = subprocess.Popen([sys.executable, "-c", "print('ready', flush=True); import time; time.sleep(60)"],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(5)


def wait_exit(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return proc.returncode
        time.sleep(0.02)
    return None


async def select_pid(pilot, app, pid: int) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("slash", *list(str(pid)), "enter")
    table = app.query_one(ProcessTable)
    assert table.selected() is not None and table.selected().pid == pid


@pytest.mark.parametrize(("key", "expected_signal"), [("t", signal.SIGTERM), ("K", signal.SIGKILL)])
async def test_k_then_confirm_sends_the_chosen_signal_to_the_selected_process(
        child: subprocess.Popen[bytes], key: str, expected_signal: int) -> None:
    app = live_app(extra_pids=(child.pid,))
    async with app.run_test(size=SIZE) as pilot:
        await select_pid(pilot, app, child.pid)
        await pilot.press("k")
        assert isinstance(app.screen, KillDialog) and app.screen.proc.pid == child.pid
        await pilot.press(key)
        assert wait_exit(child) == -expected_signal
        assert not isinstance(app.screen, KillDialog)


async def test_the_signal_buttons_work_with_the_mouse(child: subprocess.Popen[bytes]) -> None:
    app = live_app(extra_pids=(child.pid,))
    async with app.run_test(size=SIZE) as pilot:
        await select_pid(pilot, app, child.pid)
        await pilot.press("k")
        await pilot.click("#sigterm")
        assert wait_exit(child) == -signal.SIGTERM


@pytest.mark.parametrize("cancel", [("escape",), ("n",)])
async def test_cancelling_the_dialog_leaves_the_process_running(child: subprocess.Popen[bytes],
                                                                cancel: tuple[str, ...]) -> None:
    app = live_app(extra_pids=(child.pid,))
    async with app.run_test(size=SIZE) as pilot:
        await select_pid(pilot, app, child.pid)
        await pilot.press("k", *cancel)
        assert not isinstance(app.screen, KillDialog)
        # the dismiss callback notifies on a later turn of the loop: on a busy machine after one pause
        await wait_for(pilot, lambda: any("left running" in str(n.message) for n in app._notifications))
    assert wait_exit(child, 0.3) is None
    assert any("left running" in str(n.message) for n in app._notifications)


async def test_a_recording_never_offers_the_dialog_and_says_why(recording: Path) -> None:
    app = replay_app(recording, 5)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("k")
        assert not isinstance(app.screen, KillDialog)
        assert any("this is a recording" in str(n.message) for n in app._notifications)


async def test_a_process_that_exited_is_refused_without_a_dialog(child: subprocess.Popen[bytes]) -> None:
    app = live_app(extra_pids=(child.pid,))
    async with app.run_test(size=SIZE) as pilot:
        await select_pid(pilot, app, child.pid)
        child.kill()
        child.wait(5)
        await pilot.press("k")
        assert not isinstance(app.screen, KillDialog)
        assert any(f"pid {child.pid} has exited" in str(n.message) for n in app._notifications)


@pytest.mark.parametrize(("mode", "expected"), [
    ("live", None),
    ("recording", "this is a recording"),
    ("remote", "connected to daemons"),
])
def test_signals_are_offered_only_in_live_mode(mode: str, expected: str | None) -> None:
    reason = kill_refusal(mode, "x")
    assert (reason is None) if expected is None else (expected in (reason or ""))


def test_why_not_refuses_init_gpuwatch_itself_and_reused_pids(child: subprocess.Popen[bytes]) -> None:
    live = psutil.Process(child.pid)
    base = ProcessSample(pid=child.pid, gpu_index=0, create_time=live.create_time())
    unknown_start = dataclasses.replace(base, create_time=None)
    cases = [
        (dataclasses.replace(base, pid=1), "not a process gpuwatch will signal"),
        (dataclasses.replace(base, pid=os.getpid()), "gpuwatch itself"),
        (dataclasses.replace(base, create_time=1.0), "different process"),
        (base, None),
        # no start time: the command line (else the name) must still match, or nothing is sent
        (dataclasses.replace(unknown_start, cmdline=" ".join(live.cmdline())), None),
        (dataclasses.replace(unknown_start, cmdline="sleep 60"), "now runs a different command"),
        (dataclasses.replace(unknown_start, name=live.name()), None),
        (dataclasses.replace(unknown_start, name="sleep"), "is now '"),
        (unknown_start, "cannot tell whether pid"),
    ]
    for proc, expected in cases:
        reason = signals.why_not(proc)
        assert (reason is None) if expected is None else (expected in (reason or "")), (proc, reason)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a child as another user")
def test_why_not_names_the_owner_when_the_user_may_not_signal() -> None:
    """As root, a child dropped to 'nobody' is signalled by a grandchild running as 'daemon'."""
    script = ("import os, sys; sys.path.insert(0, %r);"
              "from gpuwatch.tui import signals; from gpuwatch.model.process_sample import ProcessSample;"
              "os.setgid(1); os.setuid(1);"
              "print(signals.why_not(ProcessSample(pid=int(sys.argv[1]), gpu_index=0)))")
    victim = subprocess.Popen([sys.executable, "-c", "import os, time; os.setuid(65534); time.sleep(30)"])
    try:
        time.sleep(0.2)
        root = str(Path(__file__).resolve().parents[2])
        out = subprocess.run([sys.executable, "-c", script % root, str(victim.pid)], capture_output=True,
                             text=True, timeout=30)
        assert "may not signal" in out.stdout and "nobody" in out.stdout, out.stdout + out.stderr
    finally:
        victim.kill()
        victim.wait(5)


def _identity_of(proc: subprocess.Popen[bytes]) -> ProcessSample:
    return ProcessSample(pid=proc.pid, gpu_index=0, create_time=psutil.Process(proc.pid).create_time())


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd_open in this Python")
def test_the_signal_goes_through_a_pidfd_not_kill(child: subprocess.Popen[bytes],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    real_kill = os.kill
    sent_by_kill: list[int] = []

    def kill(pid: int, sig: int) -> None:
        if sig:
            sent_by_kill.append(sig)
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", kill)
    sent, message = signals.send(_identity_of(child), signal.SIGTERM)
    assert sent and message == f"SIGTERM sent to pid {child.pid}"
    assert wait_exit(child) == -signal.SIGTERM and sent_by_kill == []


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd_open in this Python")
def test_a_pinned_process_that_exits_is_never_confused_with_a_new_one(child: subprocess.Popen[bytes]) -> None:
    """The pidfd names the process that was checked: once it has exited (and been reaped, so its pid is
    free for reuse) a signal through the pin fails instead of reaching whatever has the pid now."""
    with signals.pinned(child.pid) as fd:
        assert fd is not None
        child.kill()
        child.wait(5)
        with pytest.raises(ProcessLookupError):
            signal.pidfd_send_signal(fd, signal.SIGTERM)


def test_send_refuses_a_process_that_exited_before_the_pin(child: subprocess.Popen[bytes]) -> None:
    target = _identity_of(child)
    child.kill()
    child.wait(5)
    sent, message = signals.send(target, signal.SIGTERM)
    assert not sent and message == f"SIGTERM not sent: pid {child.pid} has exited"


async def test_a_past_moment_sends_no_signal_until_back_to_live(child: subprocess.Popen[bytes]) -> None:
    app = live_app(extra_pids=(child.pid,), ticks=5)
    async with app.run_test(size=SIZE) as pilot:
        await select_pid(pilot, app, child.pid)
        await pilot.press("left_square_bracket", "k")
        assert not isinstance(app.screen, KillDialog) and child.poll() is None
        assert any("past moment" in str(n.message) and "press l" in str(n.message) for n in app._notifications)
        await pilot.press("l")
        await select_pid(pilot, app, child.pid)
        await pilot.press("k")
        assert isinstance(app.screen, KillDialog) and app.screen.proc.pid == child.pid
