"""Whether the user may signal a process, and sending the signal: the rules behind ``k`` and ``T``/``K``/``I``.

Checked right before the dialog opens and again right before the signal goes out, because the process
may have exited or its pid been reused in between. The process is pinned first with ``pidfd_open``
(Linux 5.3+), its identity checked after that (start time where the snapshot has it, else name and command
line), and the signal sent through the pidfd: a pid recycled after the check cannot receive it, because the
pidfd still names the process that was checked. Without pidfds, ``kill(2)`` after the same check.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
from collections.abc import Iterator

import psutil

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.visible import visible

#: Start times within this many seconds are the same process (psutil rounds to the clock tick).
SAME_START_S = 1.0


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _identity(proc: ProcessSample) -> str | None:
    """``None`` when the live ``proc.pid`` is the process the snapshot saw, else why not."""
    pid = proc.pid
    try:
        live = psutil.Process(pid)
        if proc.create_time is not None:
            if abs(live.create_time() - proc.create_time) > SAME_START_S:
                return f"pid {pid} is now a different process (started later): not signalling it"
            return None
        if proc.cmdline:
            # the dashboard's copy has its control characters made visible: compare like with like
            if visible(" ".join(live.cmdline())) != visible(proc.cmdline):
                return f"pid {pid} now runs a different command: not signalling it"
            return None
        if proc.name:
            now = visible(live.name())
            return None if now == visible(proc.name) else f"pid {pid} is now '{now}': not signalling it"
    except psutil.NoSuchProcess:
        return f"pid {pid} has exited"
    except psutil.Error as exc:
        return f"cannot check pid {pid} ({visible(exc)}): not signalling it"
    return f"cannot tell whether pid {pid} is still the process shown (no start time or command): not signalling it"


def why_not(proc: ProcessSample) -> str | None:
    """``None`` when this user may signal ``proc`` now, else the reason in one line."""
    pid = proc.pid
    if pid <= 1:
        return f"pid {pid} is not a process gpuwatch will signal"
    if pid == os.getpid():
        return "that is gpuwatch itself: press q to quit"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"pid {pid} has exited"
    except PermissionError:
        try:
            owner = _user(psutil.Process(pid).uids().real)
        except (psutil.Error, OSError):
            owner = "another user"
        me = _user(os.getuid())
        return f"you ({me}) may not signal pid {pid}: it belongs to {owner}; run gpuwatch as {owner} or root"
    return _identity(proc)


@contextlib.contextmanager
def pinned(pid: int) -> Iterator[int | None]:
    """A pidfd for ``pid`` (``None`` where the kernel or Python has none); closed on leaving."""
    opener = getattr(os, "pidfd_open", None)
    fd: int | None = None
    if opener is not None and hasattr(signal, "pidfd_send_signal"):
        try:
            fd = opener(pid)
        except ProcessLookupError:
            raise  # gone already: send() says so
        except OSError:
            fd = None  # ENOSYS (old kernel) or a seccomp filter: fall back to kill(2)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def send(proc: ProcessSample, sig: int) -> tuple[bool, str]:
    """Pin the process, check it again, send ``sig`` through the pin; ``(sent, message for the user)``."""
    name = signal.Signals(sig).name
    try:
        with pinned(proc.pid) as fd:
            reason = why_not(proc)  # after pinning: the pidfd names the process this check saw
            if reason is not None:
                return False, f"{name} not sent: {reason}"
            if fd is not None:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(proc.pid, sig)
    except ProcessLookupError:
        return False, f"{name} not sent: pid {proc.pid} has exited"
    except OSError as exc:
        return False, f"{name} to pid {proc.pid} failed: {exc.strerror or exc}"
    return True, f"{name} sent to pid {proc.pid}" + ("" if fd is not None else " (kill(2): no pidfd here)")
