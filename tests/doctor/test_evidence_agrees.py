"""No finding contradicts its own evidence, on every recording: the bundled one (judged every 10 s as the
dashboard would), every fault fixture recorded on the H200, and synthetic windows with stacks and feeders.

The contradictions are written generally, as what a title claims against what the window shows: a
launch or Python claim while the feeding thread's stacks wait on the GPU or run a native op; a busy claim
while the thread waits; demand while a feeder is busy or blocked, or the work comes from the process's own
tree; a data loader while the stacks compile; a waiting claim while the thread is pegged on a core.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwatch.data import bundled_recording
from gpuwatch.doctor import diagnose
from gpuwatch.doctor.attribution import time_split
from gpuwatch.doctor.classes import feeder_findings
from gpuwatch.doctor.current import window
from gpuwatch.doctor.mechanisms import is_waiting, words
from gpuwatch.doctor.process_window import ProcessWindow
from gpuwatch.doctor.rules_threads import DEMAND_WAIT_MIN, WAITING_FOR_WORK
from gpuwatch.doctor.stack_window import ranked
from gpuwatch.doctor.window import GpuWindow, summarise
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.finding import Finding
from gpuwatch.model.recording import load
from gpuwatch.model.snapshot import Snapshot

from . import test_evidence_rules as rules
from . import test_evidence_yield as yields
from .synthetic import Load
from .synthetic import window as synthetic
from .test_mechanisms import STACKS

FIXTURES = Path(__file__).parent / "fixtures" / "faults"
MAJORITY = 0.5
PEGGED = 85.0


def _share(p: ProcessWindow, *mechanisms: str) -> float:
    return p.stacks.share(*mechanisms) if p.stacks is not None else 0.0


def _share_unclassified(p: ProcessWindow) -> float:
    return p.stacks.share(None) if p.stacks is not None else 0.0


def contradictions(f: Finding, g: GpuWindow) -> list[str]:
    """What in the window contradicts ``f`` (empty: nothing)."""
    p = next((q for q in g.processes if q.pid == f.pid), None)
    if f.pid is not None and p is None:
        return [f"names pid {f.pid}, which is not on GPU {g.index}"]
    if p is None:
        return []
    out = []
    title = f.title.lower()
    waits_gpu = _share(p, "gpu_wait", "collective")
    if ("launch" in title or "python" in title) and waits_gpu >= MAJORITY:
        out.append(f"claims launches or Python while the stacks wait on the GPU {100 * waits_gpu:.0f}%")
    if f.code == "launch_bound" and p.stacks is not None and \
            _share(p, "launch", "python", "allocator") + _share_unclassified(p) < MAJORITY:
        out.append(f"claims launches while the stacks are mostly {p.stacks.mechanism}")
    if "python" in title and _share(p, "host_op") >= MAJORITY:
        out.append("claims Python while the stacks run a native op")
    # (unless it awaits a result that a thread of its own computes meanwhile: that producer is what feeds the GPU)
    producer = p.stacks.holders if p.stacks is not None and p.stacks.awaits >= MAJORITY else None
    computing = producer is not None and producer.share("python", "host_op", "serialization", "compile") >= MAJORITY
    if f.code == "input_cpu_bound" and p.stacks is not None and is_waiting(p.stacks.mechanism) \
            and _share(p, p.stacks.mechanism or "") >= MAJORITY and not computing:
        out.append(f"claims a busy thread while its stacks wait ({p.stacks.mechanism})")
    if f.code == "input_cpu_bound" and computing and producer is not None and producer.mechanism is not None \
            and words(producer.mechanism) not in f.title:
        out.append(f"blames a producer thread without naming what it does ({producer.mechanism})")
    if f.code == "input_cpu_bound" and (p.top_thread_cpu or 0.0) < 50:
        out.append(f"claims a busy thread at {p.top_thread_cpu or 0:.0f}% of a core")
    if f.code == "demand_bound":
        if any(x.bound is not None for x in p.feeders):
            out.append("claims demand while a feeder is busy or blocked")
        if p.upstream == "tree":
            out.append("claims demand while the work comes from its own process tree")
        if p.upstream == "unknown":
            out.append("claims demand while its sockets could not be read (no evidence of a front door)")
        if _share(p, "host_op", "python", "compile", "storage") >= MAJORITY or (
                _share(p, "gpu_wait", "host_op", "python", "compile", "storage") >= MAJORITY
                and _share(p, *WAITING_FOR_WORK) < DEMAND_WAIT_MIN):  # (serving requests between waits is fine)
            out.append("claims a server waiting for work while its stacks work or wait on something else")
        if (p.top_thread_cpu or 0.0) >= PEGGED:
            out.append("claims an idle server while its feeding thread is pegged")
    if f.code == "dataloader_bound" and (_share(p, "compile") >= MAJORITY
                                         or any(x.bound == "compile" for x in p.feeders)):
        out.append("claims a data loader while the stacks compile")
    # a host that waits for the kernels in flight: in synchronize or a collective, or asleep between polls
    split = time_split(p)
    in_driver = (split.get("gpu", 0.0) + split.get("sleep", 0.0)) / 100 if p.stacks is None else 0.0
    if f.code == "long_kernels" and max(waits_gpu + _share(p, "sleep"), in_driver) < MAJORITY:
        out.append("claims long kernels while the host does not wait for the GPU (it launches or computes)")
    if f.code == "long_kernels" and "synchronize" in title and _share(p, "gpu_wait") < MAJORITY:
        out.append("says the host waits in synchronize while its stacks are mostly elsewhere")
    if f.code == "feeder_bound" and not any(x.bound is not None for x in p.feeders):
        out.append("claims its feeders are the bottleneck while none is busy or blocked")
    said = {"storage": "storage holds", "network": "the network holds", "lock": "a lock or a queue holds"}
    named = [m for m, words in said.items() if words in title]
    if f.code == "off_cpu_wait" and named and _share(p, *named) < MAJORITY and \
            (p.stacks.mechanism if p.stacks else None) in said:
        out.append(f"says it waits on {named[0]} while its stacks wait on {p.stacks.mechanism if p.stacks else None}")
    if f.code == "off_cpu_wait" and (p.top_thread_cpu or 0.0) >= PEGGED:
        out.append("claims a wait off the CPU while the feeding thread is pegged")
    # the frames of a thread that takes page faults are the code that touched the page, the wait is storage: a
    # finding may say storage against its frames only where the kernel had that thread in storage waits (D state)
    # most of its time off a core, and it says so
    off_core = 100.0 - split.get("cpu", 0.0) - split.get("runnable", 0.0)
    in_storage = split.get("io", 0.0) >= MAJORITY * off_core > 0 and any("D state" in e for e in f.evidence)
    # the stacks of what it blames: a finding that blames the feeders says what their sampled stacks do
    blamed = p.stacks
    if f.code in feeder_findings():
        blamed = ranked([x.stacks for x in p.feeders if x.bound is not None and x.stacks is not None]) or p.stacks
    if blamed is not None and f.mechanism != blamed.mechanism and not (f.mechanism == "storage" and in_storage):
        out.append(f"says mechanism {f.mechanism} while the stacks of what it blames say {blamed.mechanism}")
    return out


def judged(snaps: list[Snapshot]) -> list[str]:
    windows = {g.index: g for g in summarise(snaps)}
    return [f"{f.code} (pid {f.pid}): {c}" for f in diagnose(snaps) if f.gpu_index in windows
            for c in contradictions(f, windows[f.gpu_index])]


def bundled_windows() -> Iterator[list[Snapshot]]:
    snaps = load(bundled_recording())
    for end in range(10, len(snaps), 10):
        yield window(snaps[:end], 30.0)


def test_no_finding_on_the_bundled_recording_contradicts_its_evidence() -> None:
    bad = [(i, c) for i, w in enumerate(bundled_windows()) for c in judged(w)]
    assert bad == []


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.ndjson.gz")), ids=lambda p: p.name.split(".")[0])
def test_no_finding_on_a_fault_recording_contradicts_its_evidence(path: Path) -> None:
    assert judged(window(load(path), 10.0)) == []


SYNTHETIC = {name: value for name, value in vars(rules).items() if isinstance(value, Load)}
SYNTHETIC |= {
    "sync_loop": dataclasses.replace(rules.PEGGED_LAUNCH_LOOKALIKE, stacks=(rules.SYNC,)),
    "long_kernels": Load(util=100.0, sm=2.0, thread=100.0, stacks=(rules.SYNC,)),
    "long_kernels_proc": Load(util=100.0, sm=2.0, thread=5.0, waits=("gpu",)),
    "long_kernels_polled": Load(util=100.0, sm=1.0, thread=2.0, stacks=(rules.POLL,)),
    "off_cpu_network": Load(util=5.0, sm=4.0, thread=5.0, io_wait_threads=1, stacks=(rules.RECV,)),
    "producer_thread": Load(util=3.0, sm=2.0, thread=100.0, stacks=(yields.FUTURE, yields.LAUNCHING, yields.PRODUCING)),
    "pinning": Load(util=10.0, sm=8.0, thread=90.0, stacks=(yields.PINNING,)),
    "native_op": Load(util=15.0, sm=12.0, thread=100.0, stacks=(rules.HOST_OP, rules.LAUNCH)),
    "server_fed_by_tree": dataclasses.replace(rules.IDLE_SERVER, upstream="tree", stacks=(rules.QUEUE,)),
    "idle_server_external": dataclasses.replace(rules.IDLE_SERVER, upstream="external", stacks=(rules.EPOLL,)),
    "compiling_loader": Load(util=20.0, sm=15.0, thread=20.0, workers=4, workers_cpu=380.0, stacks=(rules.COMPILE,)),
    "server_fed_by_busy_child": dataclasses.replace(rules.IDLE_SERVER, upstream="tree", stacks=(rules.QUEUE,),
                                                    feeders=(FeederSample(900, 471, "child", cpu_percent=99.0,
                                                                          top_thread_cpu_percent=99.0),)),
}
SYNTHETIC |= {f"mechanism_{m}": Load(util=20.0, sm=15.0, thread=40.0, stacks=(dataclasses.replace(s, count=10),))
              for m, (s, _) in STACKS.items()}
SYNTHETIC |= {f"pegged_{m}": Load(util=20.0, sm=3.0, thread=100.0, stacks=(dataclasses.replace(s, count=10),))
              for m, (s, _) in STACKS.items()}


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_no_finding_on_a_synthetic_window_with_stacks_contradicts_its_evidence(name: str) -> None:
    assert judged(synthetic(SYNTHETIC[name])) == []


def test_the_check_catches_a_title_its_stacks_contradict() -> None:
    """A launch-bound finding on a thread whose stacks sit in synchronize is what the check is for."""
    snaps = synthetic(dataclasses.replace(rules.PEGGED_LAUNCH_LOOKALIKE, stacks=(rules.SYNC,)))
    g = summarise(snaps)[0]
    fake = Finding("launch_bound", "Launch-bound: tiny kernels", "warning", 80.0, 0, 471, (), "", mechanism="gpu_wait")
    assert any("wait on the GPU" in c for c in contradictions(fake, g))
