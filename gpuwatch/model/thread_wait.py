"""What a thread is doing at one sample, in the few words the doctor reasons with.

The kernel says it in two places: the state letter (R runnable or running, D uninterruptible I/O, S asleep)
and, for a sleeper, the function it sleeps in (``wchan``). A Python thread waiting for the GIL, for a
``queue.get`` or for a ``threading.Lock`` sleeps in a futex; a server waiting for requests sleeps in
epoll, select or a socket read; ``time.sleep`` sleeps in a timer; a read from storage waits in D state or an
I/O function; a blocking CUDA synchronise waits inside the NVIDIA driver; a stopped process (SIGSTOP, a
debugger, a cgroup freezer) is in state T or the freezer's trap. Which futex waits are the GIL
is told by the thread's siblings (several busy threads whose CPU sums to about one core), not here.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from gpuwatch.model.process_sample import POLL_TIMER

Wait = Literal["cpu", "lock", "file_lock", "input", "output", "child", "io", "sleep", "gpu", "stopped", "other"]

#: In the order the doctor names them: on a core (or runnable), waiting on a lock or the GIL (futex), on a file
#: lock another process holds (flock, fcntl), waiting for input on a socket, pipe or poll set, blocked sending
#: into a full pipe or socket, waiting for a child process to exit, in storage I/O, in a timed sleep, in the GPU
#: driver, stopped (by a signal or a cgroup freezer: it would run and is not let).
WAITS: tuple[Wait, ...] = ("cpu", "lock", "file_lock", "input", "output", "child", "io", "sleep", "gpu", "stopped",
                           "other")

WAIT_WORDS: dict[str, str] = {
    "cpu": "on a core",
    "lock": "waiting on a lock (futex)",
    "file_lock": "waiting on a file lock (flock, fcntl)",
    "input": "waiting for input (socket, pipe or poll)",
    "output": "blocked sending (a full pipe or socket)",
    "child": "waiting for a child process to exit (waitpid)",
    "io": "in storage I/O",
    "sleep": "in a timed sleep",
    "gpu": "waiting in the GPU driver",
    "stopped": "stopped (SIGSTOP, a debugger or a cgroup freezer)",
    "other": "asleep elsewhere",
}

_IO = ("io_schedule", "folio", "wait_on_page", "page_lock", "blk", "nfs", "fuse", "ext4", "xfs", "btrfs",
       "jbd2", "bit_wait_io", "rpc_wait")
_INPUT = ("ep_poll", "epoll", "do_select", "core_sys_select", "do_sys_poll", "poll_schedule", "sk_wait",
          "sock", "tcp_", "inet_", "unix_stream", "unix_dgram", "skb_wait", "pipe_", "wait_woken", "udp_")
#: Blocked on the sending side: a pipe whose reader does not drain it, a socket whose send buffer is full (a TCP
#: sender blocked in ``sk_stream_wait_memory`` often shows only ``wait_woken``, as a reader does: input).
_OUTPUT = ("pipe_write", "sk_stream_wait_memory", "sock_alloc_send", "unix_wait_for_peer")
#: A blocking flock() or fcntl(F_SETLKW) waits here for the process holding the lock (``/proc/locks`` names it).
_FILE_LOCK = ("lock_inode_wait", "locks_lock", "flock", "fcntl_setlk", "posix_lock", "lock_file_wait")
#: ``waitpid``/``wait4``/``waitid`` (``subprocess.run``, ``Popen.wait``) sleep here until a child exits.
_CHILD = ("do_wait", "kernel_wait", "wait_consider_task")
_SLEEP = ("nanosleep", "hrtimer", "clock_nanosleep", "schedule_timeout")
_GPU = ("nvidia", "nv_", "uvm", "os_acquire", "nvkms")
#: A frozen task (cgroup v2 ``cgroup.freeze``, v1's freezer) sleeps here rather than in state T.
_FROZEN = ("freezer_trap", "refrigerator")


@lru_cache(maxsize=512)  # a few dozen (state, channel) pairs recur every tick
def classify_wait(state: str, wchan: str | None) -> Wait:
    """One thread's wait class from its state letter and kernel wait channel (None where not readable)."""
    if state == "R":
        return "cpu"
    channel = (wchan or "").lower()
    # stopped by a signal (T), or frozen (v1's freezer holds tasks in D state: before I/O); a tracing stop (t) is
    # a profiler or debugger reading the thread, the stack sampler's own py-spy among them, not a stopped program
    if state == "T" or any(w in channel for w in _FROZEN):
        return "stopped"
    if state == "D" or any(w in channel for w in _IO):
        return "io"
    if "futex" in channel:
        return "lock"
    if any(w in channel for w in _FILE_LOCK):
        return "file_lock"
    if any(w in channel for w in _GPU):
        return "gpu"
    if any(w in channel for w in _OUTPUT):
        return "output"
    if any(w in channel for w in _CHILD):
        return "child"
    if any(w in channel for w in _INPUT):
        return "input"
    if any(w in channel for w in _SLEEP):
        return "sleep"
    return "other"


def main_thread_wait(state: str, wchan: str | None, poll_wait: str | None = None,
                     write_target: str | None = None) -> Wait:
    """:func:`classify_wait` for a process's main thread, where its blocked call was read: a poll that only
    time can end (``ProcessSample.poll_wait``: an event loop's ``asyncio.sleep``) is a timed sleep, and a write
    blocked where a read would sleep too (``ProcessSample.write_target``: a terminal or a socket that does not
    keep up) is blocked sending, not waiting for input."""
    wait = classify_wait(state, wchan)
    if wait != "input":
        return wait
    return "output" if write_target is not None else "sleep" if poll_wait == POLL_TIMER else wait
