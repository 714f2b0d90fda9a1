"""Demand-bound needs outside demand: a front door of the process (whichever of its threads reads it) with
nobody upstream busy. Work that a thread of its own makes up on a timer, or that its own children make, is not
demand, however idle the GPU loop looks while it waits for it."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.finding import Finding

from .synthetic import STDLIB, Load, native, py, thread, window

#: The GPU loop asleep in ``queue.get`` (a futex) or in a pipe read, its CPU a sliver: it waits for work.
ON_QUEUE = Load(util=6.0, sm=5.0, thread=3.0, channel="futex_wait_queue", waits=("lock",))
ON_PIPE = Load(util=6.0, sm=5.0, thread=3.0, channel="pipe_read", waits=("input",))
QUEUE_GET = thread(native("libc.so.6", "futex_wait"), py(f"{STDLIB}/queue.py", "get"), py("server.py", "gpu_loop"),
                   count=20, idle=True)
#: The load generator at the other end of the accepted connection: a process outside the tree, idle between requests.
IDLE_CLIENT = FeederSample(pid=1200, feeds=471, relation="peer", name="python3", cmdline="python3 loadgen.py",
                           cpu_percent=1.0, top_thread_cpu_percent=1.0, thread_waits=("input",))
BUSY_CHILD = FeederSample(pid=1300, feeds=471, relation="child", name="python3", cmdline="python3 make_requests.py",
                          cpu_percent=98.0, top_thread_cpu_percent=98.0, thread_waits=("cpu",))


def found(load: Load) -> list[Finding]:
    return diagnose(window(load))


def codes(findings: list[Finding]) -> list[str]:
    return [f"{f.severity}:{f.code}" for f in findings]


@pytest.mark.parametrize("load", [ON_QUEUE, ON_PIPE, dataclasses.replace(ON_QUEUE, stacks=(QUEUE_GET,))],
                         ids=["queue", "pipe", "queue_stacks"])
def test_a_gpu_loop_fed_by_its_own_thread_reading_a_front_door_from_outside_is_demand_bound(load: Load) -> None:
    """The web thread -> GPU worker handoff: another thread of the process reads requests from a connection
    accepted from outside the tree and hands them over; the client is idle. No class fits but demand."""
    findings = found(dataclasses.replace(load, upstream="external", feeders=(IDLE_CLIENT,)))
    top = top_problem(findings)
    assert top is not None and (top.severity, top.code) == ("info", "demand_bound"), codes(findings)


@pytest.mark.parametrize("load", [ON_QUEUE, ON_PIPE, dataclasses.replace(ON_QUEUE, stacks=(QUEUE_GET,))],
                         ids=["queue", "pipe", "queue_stacks"])
def test_the_same_loop_fed_by_a_thread_of_its_own_sleeping_on_a_timer_is_not_demand(load: Load) -> None:
    """No socket at all: the host source says its work comes from its own tree. Where the time goes is the
    finding (a thread that makes up work on a timer is no client), not "nothing to fix"."""
    findings = found(dataclasses.replace(load, upstream="tree"))
    assert "demand_bound" not in [f.code for f in findings], codes(findings)
    top = top_problem(findings)
    assert top is not None and top.code == "idle_breakdown", codes(findings)


def test_a_server_whose_sockets_could_not_be_read_has_no_evidence_of_demand() -> None:
    findings = found(dataclasses.replace(ON_QUEUE, upstream="unknown"))
    assert "demand_bound" not in [f.code for f in findings], codes(findings)


@pytest.mark.parametrize("upstream", ["tree", "external"])
def test_a_loop_fed_by_its_busy_child_is_feeder_bound_front_door_or_not(upstream: str) -> None:
    """A child making the requests on a core is the bottleneck, whether or not the process also listens."""
    findings = found(dataclasses.replace(ON_QUEUE, upstream=upstream, feeders=(BUSY_CHILD,)))
    top = top_problem(findings)
    assert top is not None and top.code == "feeder_bound", codes(findings)
    assert "demand_bound" not in [f.code for f in findings]
    assert any("pid 1300" in e for e in top.evidence), top.evidence


def test_a_recording_made_before_sockets_were_followed_is_judged_on_its_threads_as_then() -> None:
    """No upstream recorded at all (the older recordings): an idle server's threads alone say demand."""
    top = top_problem(found(ON_QUEUE))
    assert top is not None and top.code == "demand_bound"
