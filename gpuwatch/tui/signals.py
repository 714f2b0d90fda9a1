"""Whether the user may signal a process, and sending the signal: the rules behind the ``k`` key.

Checked right before the dialog opens and again right before the signal goes out, because the process
may have exited or its pid been reused in between (the start time is compared where it is known).
"""

from __future__ import annotations

import os
import pwd
import signal

import psutil

from gpuwatch.model.snapshot import ProcessSample


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


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
    if proc.create_time is not None:
        try:
            started = psutil.Process(pid).create_time()
        except psutil.Error:
            return f"pid {pid} has exited"
        if abs(started - proc.create_time) > 1.0:
            return f"pid {pid} is now a different process (started later): not signalling it"
    return None


def send(proc: ProcessSample, sig: int) -> tuple[bool, str]:
    """Send ``sig`` after checking again; ``(sent, message for the status line)``."""
    reason = why_not(proc)
    name = signal.Signals(sig).name
    if reason is not None:
        return False, f"{name} not sent: {reason}"
    try:
        os.kill(proc.pid, sig)
    except OSError as exc:
        return False, f"{name} to pid {proc.pid} failed: {exc.strerror or exc}"
    return True, f"{name} sent to pid {proc.pid}"
