"""What a thread's blocked system call waits for, where its wait channel alone cannot say (``/proc/PID/task/TID/
syscall`` gives the call and its arguments).

**Writes.** A thread blocked writing to a terminal that does not keep up, or to a socket whose buffer is full,
sleeps in ``wait_woken``, as a reader does. The call (``write``, ``writev``, ``sendto``, ``sendmsg``) tells the
writer, and its first argument the descriptor it writes to: ``/dev/pts/3`` (a terminal), a pipe, a socket.

**Polls.** What a thread asleep in poll, select or epoll waits for: input that another process can send, or
only time.

The kernel's wait channel says a thread waits in a poll (``ep_poll``, ``do_select``...), which is how a server
awaits requests, and also how an event loop sleeps: ``asyncio.sleep`` and ``select.select([], [], [], t)``
leave the thread in the same channels, with nothing anyone could send it. ``/proc/PID/task/TID/syscall``
gives the blocked call and its arguments: a select or poll of no descriptors is a timed sleep; an epoll
set (its descriptors are listed in ``/proc/PID/fdinfo/EPFD``) that holds only the process's own wake-ups (an
eventfd, a timerfd, a signalfd, one end of a socketpair or pipe whose other end it holds too: asyncio's
self-pipe) is a timer too. Anything else (a socket to another process, a listening socket, a tty) is input.
Where the call cannot be read (another user's process without privilege), nothing is said.
"""

from __future__ import annotations

import os
import platform
from collections import Counter

from gpuwatch.model.process_sample import POLL_INPUT, POLL_TIMER
from gpuwatch.sources.netfds import fd_names, unix_peers

#: Wait channels of a thread blocked in one of the poll calls.
POLL_CHANNELS = ("ep_poll", "do_epoll_wait", "do_select", "core_sys_select", "do_sys_poll", "poll_schedule")
#: System call numbers of the poll calls, per architecture: (call, the argument that counts descriptors or
#: names the epoll set).
_CALLS: dict[str, dict[int, tuple[str, int]]] = {
    "x86_64": {7: ("poll", 1), 23: ("select", 0), 232: ("epoll", 0), 270: ("select", 0), 271: ("poll", 1),
               281: ("epoll", 0), 441: ("epoll", 0)},
    "aarch64": {72: ("select", 0), 73: ("poll", 1), 22: ("epoll", 0), 441: ("epoll", 0)},
}
#: System call numbers of the writes, per architecture (the descriptor is the first argument of each).
_WRITES: dict[str, frozenset[int]] = {
    "x86_64": frozenset({1, 18, 20, 44, 46, 296, 307}),  # write pwrite64 writev sendto sendmsg pwritev sendmmsg
    "aarch64": frozenset({64, 66, 68, 70, 206, 211, 269}),  # write writev pwrite64 pwritev sendto sendmsg sendmmsg
}
#: The wait channels of a blocked write that a blocked read shares (a pipe's writer has ``pipe_write``).
AMBIGUOUS_CHANNELS = ("wait_woken",)
#: Descriptors that only the process itself makes ready.
OWN_WAKEUPS = ("anon_inode:[eventfd]", "anon_inode:[timerfd]", "anon_inode:[signalfd]", "anon_inode:[pidfd]")


def is_poll_channel(channel: str | None) -> bool:
    return channel is not None and any(c in channel for c in POLL_CHANNELS)


def is_ambiguous_channel(channel: str | None) -> bool:
    """A wait channel a blocked write and a blocked read share: only the call tells which."""
    return channel is not None and any(c in channel for c in AMBIGUOUS_CHANNELS)


def _blocked_call(pid: int, tid: int | None) -> tuple[int, list[int]] | None:
    """The number and first six arguments of the call thread ``tid`` of ``pid`` is blocked in; None when it runs
    or cannot be read."""
    try:
        with open(f"/proc/{pid}/task/{tid or pid}/syscall", "rb") as f:
            parts = f.read().split()
        return (int(parts[0]), [int(a, 16) for a in parts[1:7]]) if len(parts) >= 7 else None
    except (OSError, ValueError):
        return None  # "running", gone, or not ours to read


def read_write_target(pid: int, tid: int | None = None) -> str | None:
    """What thread ``tid`` (the main one by default) of ``pid`` is blocked writing to (``/dev/pts/3``,
    ``pipe:[123]``, ``socket:[456]``), or None when it is not blocked in a write."""
    call = _blocked_call(pid, tid)
    if call is None or call[0] not in _WRITES.get(platform.machine(), frozenset()):
        return None
    try:
        return os.readlink(f"/proc/{pid}/fd/{call[1][0]}")
    except OSError:
        return "an unknown descriptor"


def read_poll_wait(pid: int, tid: int | None = None) -> str | None:
    """:data:`POLL_TIMER` when thread ``tid`` (the main one by default) of ``pid`` is blocked in a poll call
    that only time can end, :data:`POLL_INPUT` when input from another process could, None when it is not in
    one or its call cannot be read."""
    blocked = _blocked_call(pid, tid)
    call = None if blocked is None else _CALLS.get(platform.machine(), {}).get(blocked[0])
    if blocked is None or call is None:
        return None
    args = blocked[1]
    kind, at = call
    if kind != "epoll":
        return POLL_TIMER if args[at] == 0 else POLL_INPUT
    return POLL_TIMER if _only_own_wakeups(pid, args[at]) else POLL_INPUT


def _only_own_wakeups(pid: int, epfd: int) -> bool:
    """The epoll set ``epfd`` of ``pid`` watches nothing another process can make ready."""
    try:
        with open(f"/proc/{pid}/fdinfo/{epfd}", "rb") as f:
            watched = [line.split()[1].decode() for line in f if line.startswith(b"tfd:")]
    except (OSError, IndexError):
        return False
    links = _links(pid)  # fd -> what it points at, read once for the watched ones and their other ends
    sockets, pipes = [], []
    for fd in watched:
        target = links.get(fd)
        if target is None:
            return False  # closed since, or beyond what is read: not known to be its own
        if target.startswith("socket:["):
            sockets.append(int(target[8:-1]))
        elif target.startswith("pipe:["):
            pipes.append(int(target[6:-1]))
        elif target not in OWN_WAKEUPS:
            return False  # a tty, a file, an inotify set: input
    if not sockets and not pipes:
        return True
    # a pipe is its own when it holds both ends; a socket when the other end of the pair is its own too
    held = Counter(links.values())
    if any(held[f"pipe:[{p}]"] < 2 for p in pipes):
        return False
    peers = unix_peers(frozenset(sockets)) if sockets else {}
    return all(held[f"socket:[{peers.get(s)}]"] > 0 for s in sockets)


def _links(pid: int) -> dict[str, str]:
    """What each of ``pid``'s descriptors (at most ``netfds.MAX_FDS``) points at: ``socket:[123]``, a path."""
    out: dict[str, str] = {}
    for name in fd_names(pid) or ():
        try:
            out[name] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
    return out
