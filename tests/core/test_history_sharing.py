"""A Snapshot kept in the History shares the values it repeats from the one before, and reads the same."""

from __future__ import annotations

import copy
import dataclasses
import gc
import sys
import types
from typing import Any

from gpuwatch.data import bundled_recording
from gpuwatch.model.codec import snapshot_from_dict, snapshot_to_dict
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Snapshot
from gpuwatch.sampler.history import History
from gpuwatch.sources.replay import ReplayProducer


def _text(s: str) -> str:
    """An equal string that is another object (as a source or a JSON decoder makes one each tick)."""
    return "".join(list(s))


def _snap(t: float, util: float, pid: int = 4242, mem_total: float = 1.5e11, clocks: float = 0.0) -> Snapshot:
    gpu = GpuSample(index=0, uuid=_text("GPU-1234"), name=_text("NVIDIA H200"), gpu_util=util,
                    power_limit_w=mem_total / 2e8, mem_total_bytes=int(mem_total),
                    sm_clock_mhz=clocks, clock_events=(_text("sw_power_cap"),))
    proc = ProcessSample(pid=pid, gpu_index=0, user=_text("alice"), cmdline=_text("python serve.py --port 80"),
                         cpu_percent=util / 2, thread_waits=(_text("cpu"), _text("gpu")))
    return Snapshot(time=t, host=HostSample(hostname=_text("node-7"), mem_total_bytes=2**36),
                    gpus=(gpu,), processes=(proc,))


def test_a_repeated_value_is_kept_once_and_every_snapshot_reads_as_it_was_made() -> None:
    history = History(capacity=10)
    first, second = _snap(1.0, 40.0), _snap(2.0, 55.0)
    made = copy.deepcopy(second)
    history.append(first)
    history.append(second)
    assert second == made  # equal values, field by field
    g1, g2 = first.gpus[0], second.gpus[0]
    p1, p2 = first.processes[0], second.processes[0]
    assert g2.name is g1.name and g2.uuid is g1.uuid and g2.power_limit_w is g1.power_limit_w
    assert g2.clock_events is g1.clock_events and p2.cmdline is p1.cmdline and p2.thread_waits is p1.thread_waits
    assert second.host.hostname is first.host.hostname
    assert g2.gpu_util == 55.0 and p2.cpu_percent == 27.5  # what changed stays the new snapshot's own


def test_a_zero_keeps_its_sign() -> None:
    history = History(capacity=10)
    history.append(_snap(1.0, 40.0, clocks=0.0))
    second = _snap(2.0, 40.0, clocks=-0.0)
    history.append(second)
    assert str(second.gpus[0].sm_clock_mhz) == "-0.0"


def test_a_process_takes_values_only_from_the_same_pid_on_the_same_gpu() -> None:
    history = History(capacity=10)
    first = _snap(1.0, 40.0, pid=1)
    second = _snap(2.0, 40.0, pid=2)
    history.append(first)
    history.append(second)
    assert second.processes[0].cmdline == first.processes[0].cmdline
    assert second.processes[0].cmdline is not first.processes[0].cmdline


def test_a_gpu_whose_uuid_changed_takes_nothing_from_the_old_one() -> None:
    history = History(capacity=10)
    first = _snap(1.0, 40.0)
    second = dataclasses.replace(_snap(2.0, 40.0), gpus=(dataclasses.replace(_snap(2.0, 40.0).gpus[0],
                                                                             uuid=_text("GPU-9999")),))
    history.append(first)
    history.append(second)
    assert second.gpus[0].name is not first.gpus[0].name


def _size(roots: list[Any]) -> int:
    seen: set[int] = set()
    total, stack = 0, list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def test_the_bundled_recordings_snapshots_take_a_third_less_in_a_history_than_apart() -> None:
    producer = ReplayProducer(bundled_recording(), speed=0, loop=False)
    decoded = []
    while len(decoded) < 200 and (snap := producer.collect()) is not None:
        decoded.append(snap)
    producer.close()
    apart = [snapshot_from_dict(snapshot_to_dict(s)) for s in decoded]
    history = History(capacity=len(decoded))
    for s in [snapshot_from_dict(snapshot_to_dict(s)) for s in decoded]:
        history.append(s)
    assert list(history) == apart
    assert _size(list(history)) < 0.75 * _size(apart)
