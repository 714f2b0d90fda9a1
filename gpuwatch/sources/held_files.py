"""/proc files held open between ticks, so reading one again is a single ``pread``.

Opening a /proc file walks and revalidates its path (pid, task, tid, file): two thirds of the cost of a
read of a thread's stat file (measured on a development machine: 11 us to open, read and close it; 4 us to
pread a held one; 8 and 2.5 us for a process's io file). The host source reads the same files of each GPU
process every tick or every few seconds (its stat, io and wait channel, its workers' stat, its threads' stat
and schedstat, the machine's /proc/stat and meminfo), so it keeps them open.

A held file answers for the process or thread it was opened for, never for another one that reuses the id:
once that one has ended its reads fail with ESRCH, as a path's would, and the file is closed. The reader
releases a process's files when it stops following it, and a thread's when a scan no longer finds it.
At most MAX_HELD files are held per thread (half the soft limit on open files when that is lower);
beyond it a file is read and closed as before, so a host with thousands of GPU-process threads costs
what it did, never an exhausted fd table. Each reading thread holds its own files: closing one while
another thread read it could let a new file take its number.
"""

from __future__ import annotations

import os
import threading

#: The most files held per reading thread: the stat and schedstat files of 4 GPU processes of 60 threads
#: each, with room for their own files and their workers'; the fd numbers stay under 1024, where
#: ``select()`` still works for whatever else the process opens.
MAX_HELD = 512


def _limit() -> int:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return MAX_HELD
    return MAX_HELD if soft == resource.RLIM_INFINITY else max(0, min(MAX_HELD, soft // 2))


class _Files:
    """One reading thread's held files: owner pid -> path -> fd (owner 0: the machine's files)."""

    def __init__(self) -> None:
        self.by_owner: dict[int, dict[str, int]] = {}
        self.count = 0
        self.limit = _limit()

    def __del__(self) -> None:  # the reading thread ended: its files go with it
        for files in self.by_owner.values():
            for fd in files.values():
                os.close(fd)


_local = threading.local()


def _mine() -> _Files:
    try:
        files: _Files = _local.files
        return files
    except AttributeError:
        _local.files = mine = _Files()
        return mine


def read(owner: int, path: str, size: int = 4096) -> bytes:
    """Up to ``size`` bytes of ``path`` (a /proc file of process ``owner``), from a held fd; OSError when it
    cannot be read (gone, not permitted)."""
    held = _mine()
    files = held.by_owner.get(owner)
    fd = None if files is None else files.get(path)
    if fd is None:
        fd = os.open(path, os.O_RDONLY)
        if held.count >= held.limit:
            try:
                return os.read(fd, size)
            finally:
                os.close(fd)
        if files is None:
            files = held.by_owner[owner] = {}
        files[path] = fd
        held.count += 1
    try:
        return os.pread(fd, size, 0)
    except OSError:
        del held.by_owner[owner][path]
        held.count -= 1
        os.close(fd)
        raise


def read_whole(owner: int, path: str) -> bytes:
    """All of ``path`` (a machine-wide file that may outgrow one read, /proc/stat on a large host)."""
    size = 65536
    while True:
        raw = read(owner, path, size)
        if len(raw) < size:
            return raw
        size *= 4


def release(owner: int, prefix: str = "") -> None:
    """Close the held files of process ``owner`` (only those whose path starts with ``prefix`` when given)."""
    held = _mine()
    files = held.by_owner.get(owner)
    if files is None:
        return
    for path in [p for p in files if p.startswith(prefix)] if prefix else list(files):
        os.close(files.pop(path))
        held.count -= 1
    if not files:
        del held.by_owner[owner]


def held_count() -> int:
    """How many files this thread holds."""
    return _mine().count
