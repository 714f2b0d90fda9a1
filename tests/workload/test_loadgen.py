"""The demand variants' load generator, with real processes and sockets (no torch): it is no descendant of the
server it feeds, it sends on its schedule, and it goes when the server does, even one killed outright."""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from gpuwatch.sources.procfs import read_children
from gpuwatch.workload import loadgen

#: A server that starts a generator on its front door, says both pids, then reads what arrives: the size of
#: each of the first reads on its own line, then nothing more (it keeps reading).
TCP_SERVER = """
import os, sys
from gpuwatch.workload import loadgen
listener = loadgen.front_door()
gen = loadgen.start('tcp', listener.getsockname()[1], sys.argv[1], 60)
conn, _ = listener.accept()
print(os.getpid(), gen, flush=True)
for i in range(3):
    print(len(conn.recv(4096)), flush=True)
while conn.recv(4096):
    pass
"""
UDP_SERVER = """
import os, socket, sys
from gpuwatch.workload import loadgen
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind(('127.0.0.1', 0))
gen = loadgen.start('udp', server.getsockname()[1], sys.argv[1], 60)
print(os.getpid(), gen, flush=True)
for i in range(3):
    print(len(server.recv(64)), flush=True)
while True:
    server.recv(64)
"""


@pytest.fixture
def servers() -> Iterator[list[tuple[subprocess.Popen[str], int]]]:
    """Started servers and their generators: killed after the test (the generators are no one's children here)."""
    started: list[tuple[subprocess.Popen[str], int]] = []
    yield started
    for proc, gen in started:
        proc.kill()
        proc.wait()
        if loadgen.alive(gen):
            os.kill(gen, signal.SIGKILL)


def _serve(code: str, schedule: str, servers: list[tuple[subprocess.Popen[str], int]]) -> tuple[
        subprocess.Popen[str], int, list[int]]:
    proc = subprocess.Popen([sys.executable, "-c", code, schedule], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pid, gen = (int(v) for v in proc.stdout.readline().split())
    servers.append((proc, gen))
    assert pid == proc.pid
    return proc, gen, [int(proc.stdout.readline()) for _ in range(3)]


def _gone_within(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while loadgen.alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    return not loadgen.alive(pid)


@pytest.mark.parametrize("code", [TCP_SERVER, UDP_SERVER], ids=["tcp", "udp"])
def test_the_generator_is_no_descendant_of_the_server_and_goes_when_the_server_is_killed(
        code: str, servers: list[tuple[subprocess.Popen[str], int]]) -> None:
    proc, gen, reads = _serve(code, "poisson:60", servers)
    assert all(n >= 1 for n in reads)  # requests arrive
    assert gen not in read_children(proc.pid, depth=4)
    assert os.getsid(gen) != os.getsid(proc.pid)  # its own session: no signal to the server's group reaches it
    proc.send_signal(signal.SIGKILL)  # no hang-up, no finish(): the server simply vanishes
    proc.wait()
    assert _gone_within(gen, 5.0)


def test_a_burst_arrives_as_one_write_of_its_requests(servers: list[tuple[subprocess.Popen[str], int]]) -> None:
    _, _, reads = _serve(TCP_SERVER, "bursts:40:0.3", servers)
    assert reads == [40, 40, 40]


def test_finish_kills_a_generator_that_does_not_stop(servers: list[tuple[subprocess.Popen[str], int]]) -> None:
    """The server still up and reading: the generator has no reason to stop, so ``finish`` kills it."""
    _, gen, _ = _serve(TCP_SERVER, "poisson:60", servers)
    loadgen.finish(gen, wait_s=0.2)
    assert _gone_within(gen, 5.0)


def test_schedules_are_poisson_at_a_rate_or_fixed_bursts() -> None:
    gaps = [d for d, n in itertools.islice(loadgen.arrivals("poisson:50", random.Random(3)), 4000)]
    assert 0.015 < sum(gaps) / len(gaps) < 0.025  # a mean gap of 1/50 s
    assert list(itertools.islice(loadgen.arrivals("bursts:40:1.5", random.Random(3)), 2)) == [(1.5, 40)] * 2
    with pytest.raises(ValueError, match="poisson:RATE or bursts:N:SECONDS"):
        next(loadgen.arrivals("steady:10", random.Random(3)))
