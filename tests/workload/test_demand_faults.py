"""The demand variants run for real on the CPU, read by the host source as the doctor's evidence: the server has
a front door, its requests come from a load generator outside its process tree (no descendant of it) that is
idle between requests, the doctor calls it demand-bound on an idle GPU, and the generator goes when the variant
does."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter

import pytest
from doctor.live import on_idle_gpu
from tools import require_torch

require_torch()

from gpuwatch.doctor import diagnose, top_problem  # noqa: E402
from gpuwatch.model.thread_wait import classify_wait  # noqa: E402
from gpuwatch.sources.procfs import read_children, read_wait_channel  # noqa: E402
from gpuwatch.workload import loadgen  # noqa: E402

pytestmark = pytest.mark.torch  # CI's second pass, with torch's CPU build

#: The variant's body on the CPU with small matrices (its GPU sizes would take the test's two cores for minutes),
#: on one thread (torch's CPU thread pool spins between ops: on the GPU the host thread only launches).
BODY = """
import sys, torch
torch.set_num_threads(1)
from gpuwatch.workload.fault_threads import BODIES
BODIES[sys.argv[1]](torch, torch.device('cpu'), float(sys.argv[2]), lambda: print('ready', flush=True), size=64)
"""
SECONDS = 8.0


def _started(fault: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", BODY, fault, str(SECONDS)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _generators(server: int) -> list[int]:
    """The load generators this server started, found by their command line (they are not its children)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"gpuwatch.workload.loadgen" in argv and argv[-2:-1] == [str(server).encode()] and loadgen.alive(int(name)):
            out.append(int(name))
    return out


def _main_thread_waits(pid: int, reads: int = 20) -> str | None:
    """What the GPU loop's thread (the main one) waits on most often while asleep, as the host source reads
    it (``/proc/PID/wchan``), over ``reads`` reads 50 ms apart (it is on a core now and then, serving)."""
    seen: Counter[str] = Counter()
    for _ in range(reads):
        channel = read_wait_channel(pid)
        if channel is not None:
            seen[classify_wait("S", channel)] += 1
        time.sleep(0.05)
    return seen.most_common(1)[0][0] if seen else None


#: fault -> (how its generator reaches it, what the GPU loop's thread, the main one, waits on)
CASES = {"demand_socket": ("udp", "input"), "demand_queue": ("tcp", "lock"), "demand_bursty": ("tcp", "input")}


@pytest.mark.parametrize("fault", sorted(CASES))
def test_the_demand_comes_from_an_idle_generator_outside_the_servers_tree(fault: str) -> None:
    proc = _started(fault)
    try:
        (generator,) = _generators(proc.pid)
        assert generator not in read_children(proc.pid, depth=4)
        snaps = on_idle_gpu(proc.pid, polls=6)
        details, feeders = snaps[-1].processes[0], list(snaps[-1].feeders)
        assert details.upstream == "external", details
        assert _main_thread_waits(proc.pid) == CASES[fault][1]
        if CASES[fault][0] == "tcp":  # the other end of an accepted loopback connection is found: a peer, idle
            (peer,) = feeders
            assert (peer.pid, peer.relation) == (generator, "peer"), peer
            assert peer.cpu_percent is not None and peer.cpu_percent < 20, peer
        else:  # a datagram names no sender: no feeder, and the generator is no child to find
            assert feeders == [], feeders
        findings = diagnose(snaps)  # the doctor, on this evidence and an idle GPU: a server waiting for requests
        top = top_problem(findings)
        assert top is not None and top.code == "demand_bound", [f.code for f in findings]
        assert proc.wait(timeout=SECONDS + 30) == 0
        deadline = time.monotonic() + loadgen.FINISH_WAIT_S + 2
        while _generators(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _generators(proc.pid) == []  # no orphan left behind
    finally:
        proc.kill()
        proc.wait()
