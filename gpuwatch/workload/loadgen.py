"""Requests from outside the server's process tree, as in production: a detached load generator.

A demand variant (``fault_threads.demand_*``) models a server that waits for requests. Its requests must come
from a process that is not its own: a client the server started (its child) or a thread of its own that makes
up requests on a timer is work from inside the tree, which is not demand. :func:`start` runs ``python -m
gpuwatch.workload.loadgen``, which forks and leaves its session (its parent exits at once, so the generator
is reparented and is no descendant of the server), connects to the server's port on 127.0.0.1 and sends
one byte per request on a schedule: Poisson arrivals (``poisson:RATE``) or bursts (``bursts:N:SECONDS``).

It stops when the server closes the connection (TCP: end of stream; UDP: the port refuses the next
datagram), when the server's pid is gone, or after its lifetime; :func:`finish` waits for it to go and kills
it if it has not, so a variant leaves no orphan behind.
"""

from __future__ import annotations

import os
import random
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

_MODULE = "gpuwatch.workload.loadgen"
#: How long :func:`finish` waits for the generator to notice the closed socket before it kills it.
FINISH_WAIT_S = 3.0


def start(kind: str, port: int, schedule: str, seconds: float) -> int:
    """Start a detached generator sending to 127.0.0.1:``port`` over ``kind`` ("tcp" or "udp") on ``schedule``
    for at most ``seconds``; returns its pid once it is detached (a TCP generator has connected by then)."""
    out = subprocess.run([sys.executable, "-m", _MODULE, kind, str(port), schedule, f"{seconds:g}", str(os.getpid())],
                         capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout.split()[0])


def front_door() -> socket.socket:
    """The server's TCP front door on 127.0.0.1 (a free port); ``accept`` fails after a minute without a client
    instead of hanging the variant."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(60)
    return listener


def hang_up(conn: socket.socket) -> None:
    """Close an accepted connection so that a thread blocked in ``recv`` on it wakes, and the generator stops."""
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie waiting for its reaper has)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def finish(pid: int, wait_s: float = FINISH_WAIT_S) -> None:
    """Wait (after the server closed its socket) for the generator to exit; kill it past ``wait_s``."""
    end = time.monotonic() + wait_s
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    if alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def arrivals(schedule: str, rng: random.Random) -> Iterator[tuple[float, int]]:
    """(seconds to wait, requests to send then), forever: ``poisson:RATE`` or ``bursts:N:SECONDS``."""
    kind, *args = schedule.split(":")
    if kind == "poisson":
        rate = float(args[0])
        while True:
            yield rng.expovariate(rate), 1
    elif kind == "bursts":
        n, every = int(args[0]), float(args[1])
        while True:
            yield every, n
    else:
        raise ValueError(f"schedule {schedule!r}: expected poisson:RATE or bursts:N:SECONDS")


def _server_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def send(sock: socket.socket, schedule: str, server: int, seconds: float) -> None:
    """The generator's loop: wait in ``select`` on its own socket between requests (readable: the server closed
    the stream, or a datagram was refused), send, until the server is gone or ``seconds`` have passed."""
    end = time.monotonic() + seconds
    udp = sock.type == socket.SOCK_DGRAM
    for delay, n in arrivals(schedule, random.Random(1)):
        if time.monotonic() >= end or not _server_alive(server):
            return
        ready, _, _ = select.select([sock], [], [], delay)
        if ready and not sock.recv(64):
            return  # end of stream: the server closed the connection
        for _ in range(n if udp else 1):
            sock.send(b"r" if udp else b"r" * n)


def _main(kind: str, port: int, schedule: str, seconds: float, server: int) -> None:
    """Detach (no descendant of the server), connect, print its pid (the starter's ``subprocess.run`` returns
    then) and send until told to stop by the server's socket, its exit, or the lifetime."""
    if os.fork():
        os._exit(0)
    os.setsid()
    if kind == "udp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.connect(("127.0.0.1", port))  # connected: a closed server port refuses, and the generator stops
    else:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.settimeout(None)
    print(os.getpid(), flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        send(sock, schedule, server, seconds)
    except OSError:
        pass  # the server went away mid-send (reset, refused): the work is over
    finally:
        sock.close()


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
