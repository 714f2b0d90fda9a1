"""Demand or not, decided on real processes: a GPU loop waiting on a queue that a thread of its own fills from
a TCP connection a detached client opened is demand-bound; the same loop fed by a thread of its own that
sleeps on a timer, with no socket, is not (its work comes from its own tree)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.workload import loadgen

from .live import on_idle_gpu

#: The web thread -> GPU worker handoff, without torch: the "GPU loop" (the main thread) takes requests from a
#: queue that a listener thread fills from a connection accepted from a detached load generator.
HANDOFF = """
import queue, threading
from gpuwatch.workload import loadgen
listener = loadgen.front_door()
gen = loadgen.start('tcp', listener.getsockname()[1], 'poisson:15', 60)
conn, _ = listener.accept()
requests = queue.Queue()
def listen():
    while data := conn.recv(4096):
        for _ in data:
            requests.put(1)
threading.Thread(target=listen, daemon=True).start()
print(gen, flush=True)
while True:
    requests.get()
    sum(i * i for i in range(2000))
"""
#: The same loop, its requests made up by a thread of its own on a timer: no socket at all.
TIMER = """
import queue, random, threading
requests = queue.Queue()
def tick():
    rng = random.Random(1)
    while True:
        threading.Event().wait(rng.expovariate(15.0))
        requests.put(1)
threading.Thread(target=tick, daemon=True).start()
print(0, flush=True)
while True:
    requests.get()
    sum(i * i for i in range(2000))
"""


@pytest.fixture
def server() -> Iterator[list[tuple[subprocess.Popen[str], int]]]:
    started: list[tuple[subprocess.Popen[str], int]] = []
    yield started
    for proc, gen in started:
        proc.kill()
        proc.wait()
        if gen:
            loadgen.finish(gen)


def _start(code: str, started: list[tuple[subprocess.Popen[str], int]]) -> int:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    started.append((proc, int(proc.stdout.readline())))
    return proc.pid


def test_a_loop_fed_through_a_queue_by_its_listener_thread_from_a_detached_client_is_demand_bound(
        server: list[tuple[subprocess.Popen[str], int]]) -> None:
    snaps = on_idle_gpu(_start(HANDOFF, server))
    assert snaps[-1].processes[0].upstream == "external"
    assert [(f.relation, f.pid) for f in snaps[-1].feeders] == [("peer", server[0][1])]
    findings = diagnose(snaps)
    top = top_problem(findings)
    assert top is not None and (top.severity, top.code) == ("info", "demand_bound"), [f.code for f in findings]


def test_the_same_loop_fed_by_a_timer_thread_of_its_own_is_not_demand(
        server: list[tuple[subprocess.Popen[str], int]]) -> None:
    snaps = on_idle_gpu(_start(TIMER, server))
    assert snaps[-1].processes[0].upstream == "tree"
    findings = diagnose(snaps)
    assert "demand_bound" not in [f.code for f in findings]
    top = top_problem(findings)
    assert top is not None and top.code == "idle_breakdown", [f.code for f in findings]
