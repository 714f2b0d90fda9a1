"""Who holds the file lock a process waits on: a blocking ``flock()`` or ``fcntl(F_SETLKW)`` sleeps until the
holder lets go, and ``/proc/locks`` lists each lock with its holder and, under it, the processes blocked on it.
Read only while a followed process waits on one (its wait channel says so): the file can be long on a busy host.
"""

from __future__ import annotations


def lock_holder(locks: str, pid: int) -> int | None:
    """The process holding the file lock ``pid`` is blocked on, from the body of ``/proc/locks`` (a blocked
    waiter's line is ``N: -> FLOCK ADVISORY WRITE <pid> ...`` under the holder's ``N: FLOCK ... <holder> ...``);
    None when ``pid`` waits on none there."""
    holders: dict[str, int] = {}
    waits_on: str | None = None
    for line in locks.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        if fields[1] == "->":
            if len(fields) > 5 and fields[5] == str(pid):
                waits_on = fields[0]
        elif fields[4].isdigit() and fields[0] not in holders:
            holders[fields[0]] = int(fields[4])
    return holders.get(waits_on) if waits_on is not None else None


def read_lock_holder(pid: int) -> int | None:
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            return lock_holder(fh.read(), pid)
    except OSError:
        return None

