"""Where the GPU's idle time goes, thread by thread: each attribution driven from synthetic samples (the
per-thread CPU, schedstat run delay and wait classes the host source reads from /proc), each class read
off it, and each fix checked against the evidence that chose it."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.attribution import attribution_line, time_split
from gpuwatch.doctor.window import summarise
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import HostSample, Snapshot
from gpuwatch.model.thread_wait import classify_wait

from .synthetic import Load, window


def with_threads(snaps: list[Snapshot], cpus: tuple[float, ...], waits: tuple[tuple[str, ...], ...],
                 run_waits: tuple[float, ...] = (), host_cpu: float = 10.0, running: int = 2,
                 **process: object) -> list[Snapshot]:
    """The window's process given working threads (CPU % each), their wait classes sample by sample (cycled),
    their run delay (% of the interval) and the host's load."""
    out = []
    for i, s in enumerate(snaps):
        p = dataclasses.replace(s.processes[0], thread_cpu_percents=cpus, thread_waits=waits[i % len(waits)],
                                thread_run_wait_percents=run_waits, top_thread_cpu_percent=cpus[0],
                                cpu_percent=sum(cpus), run_wait_percent=sum(run_waits) if run_waits else None,
                                **process)  # type: ignore[arg-type]
        host = dataclasses.replace(s.host, cpu_percent=host_cpu, procs_running=running)
        out.append(dataclasses.replace(s, processes=(p,), host=host))
    return out


def top(snaps: list[Snapshot]) -> str | None:
    found = top_problem(diagnose(snaps))
    return found.code if found else None


# -- the wait classes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("state", "wchan", "want"), [
    ("R", None, "cpu"), ("R", "futex_wait_queue", "cpu"),
    ("S", "futex_wait_queue", "lock"), ("S", "futex_wait_queue_me", "lock"),
    ("S", "ep_poll", "input"), ("S", "do_select", "input"), ("S", "unix_stream_read_generic", "input"),
    ("S", "sk_wait_data", "input"), ("S", "pipe_read", "input"), ("S", "poll_schedule_timeout.constprop.0", "input"),
    ("D", None, "io"), ("S", "folio_wait_bit_common", "io"), ("S", "io_schedule", "io"),
    ("S", "hrtimer_nanosleep", "sleep"), ("S", "do_nanosleep", "sleep"),
    ("S", "os_acquire_spinlock_nvidia", "gpu"), ("S", None, "other"), ("S", "do_wait", "child"),
    ("T", "do_signal_stop", "stopped"), ("t", "ptrace_stop", "other"), ("S", "do_freezer_trap", "stopped"),
    ("D", "__refrigerator", "stopped"),
    ("S", "anon_pipe_write", "output"), ("S", "pipe_write", "output"), ("S", "unix_wait_for_peer", "output"),
    ("S", "sock_alloc_send_pskb", "output"), ("S", "sk_stream_wait_memory", "output"),
])
def test_a_threads_wait_class_comes_from_its_state_and_wait_channel(state: str, wchan: str | None,
                                                                    want: str) -> None:
    assert classify_wait(state, wchan) == want


# -- the time split ------------------------------------------------------------------------------------------

def test_the_feeding_threads_time_adds_up_measured_cpu_and_run_delay_then_the_sampled_waits() -> None:
    snaps = with_threads(window(Load(util=1.0, sm=0.2)), (58.0, 30.0), (("cpu", "cpu"), ("lock", "cpu")),
                         run_waits=(11.0, 2.0))
    p = summarise(snaps)[0].processes[0]
    split = time_split(p)
    assert split["cpu"] == pytest.approx(58.0) and split["runnable"] == pytest.approx(11.0)
    assert split["lock"] == pytest.approx(31.0)  # the sleeping rest, all of it seen on a lock
    assert sum(split.values()) == pytest.approx(100.0)
    assert attribution_line(p).endswith("58% on a core, 11% runnable without a core, 31% waiting on a lock (futex)")


# -- the classes read off it ---------------------------------------------------------------------------------

GIL = ((20.0, 26.0, 25.0, 24.0), (("lock", "cpu", "lock", "lock"), ("cpu", "lock", "lock", "lock")))


def test_threads_that_sum_to_one_core_none_pegged_are_gil_contention_not_nothing() -> None:
    snaps = with_threads(window(Load(util=1.0, sm=0.2, thread=26.0)), *GIL, run_waits=(0.2, 0.1, 0.3, 0.1))
    findings = diagnose(snaps)
    assert top(snaps) == "gil_contention"
    gil = next(f for f in findings if f.code == "gil_contention")
    assert any("4 threads at 10% of a core or more, 95% of one core together" in e for e in gil.evidence)
    assert "processes" in gil.fix and "GIL" in gil.fix


def test_the_same_threads_starved_of_a_core_on_a_full_host_are_host_contention() -> None:
    snaps = with_threads(window(Load(util=1.0, sm=0.2, thread=26.0)), *GIL, run_waits=(40.0, 35.0, 30.0, 30.0),
                         host_cpu=100.0, running=40)
    assert top(snaps) == "host_cpu_contention"
    f = next(f for f in diagnose(snaps) if f.code == "host_cpu_contention")
    assert any("runnable without a core" in e for e in f.evidence)
    assert any("0.0 of 16 cores idle" in e for e in f.evidence)


def test_a_starved_thread_on_a_host_with_idle_cores_is_not_blamed_on_the_host() -> None:
    snaps = with_threads(window(Load(util=1.0, sm=0.2, thread=26.0)), (26.0,), (("cpu",),), run_waits=(40.0,),
                         host_cpu=30.0, running=4)
    assert "host_cpu_contention" not in {f.code for f in diagnose(snaps)}


def test_a_pegged_thread_is_its_own_limit_and_a_pegged_thread_without_a_core_is_the_hosts() -> None:
    pegged = with_threads(window(Load(util=1.0, sm=0.2, thread=99.0)), (99.0,), (("cpu",),), run_waits=(0.5,))
    assert top(pegged) == "input_cpu_bound"
    starved = with_threads(window(Load(util=1.0, sm=0.2, thread=90.0)), (90.0,), (("cpu",),), run_waits=(45.0,),
                           host_cpu=99.0, running=50)
    assert top(starved) == "host_cpu_contention"


def test_a_server_asleep_in_poll_for_the_gpus_idle_time_is_demand_bound_info_with_headroom() -> None:
    snaps = with_threads(window(Load(util=40.0, sm=33.0, thread=40.0)), (40.0,), (("input",), ("cpu",)),
                         run_waits=(0.0,), sm_util=22.0)
    findings = diagnose(snaps)
    assert top(snaps) == "demand_bound" and all(f.severity == "info" for f in findings)
    demand = next(f for f in findings if f.code == "demand_bound")
    assert any("the GPU idles 60% of the time" in e for e in demand.evidence)


def test_waiting_on_a_socket_while_reading_megabytes_is_not_an_idle_server() -> None:
    snaps = with_threads(window(Load(util=20.0, sm=15.0, thread=10.0)), (10.0,), (("input",),), run_waits=(0.0,),
                         sm_util=15.0, io_read_chars_s=80e6)
    assert "demand_bound" not in {f.code for f in diagnose(snaps)}


def test_an_under_used_gpu_with_no_class_that_fits_gets_idle_breakdown_never_silence() -> None:
    snaps = with_threads(window(Load(util=5.0, sm=3.0, thread=30.0)), (30.0,), (("other",), ("cpu",)),
                         run_waits=(0.0,), sm_util=5.0)
    findings = diagnose(snaps)
    assert top(snaps) == "idle_breakdown"
    f = findings[0]
    assert any("feeding thread" in e for e in f.evidence) and "py-spy dump --pid 471" in f.fix


# -- fixes that agree with their evidence ------------------------------------------------------------------

def _loader(host_cpu: float) -> list[Snapshot]:
    snaps = with_threads(window(Load(util=2.0, sm=1.0, thread=4.0)), (4.0,), (("input",),), run_waits=(0.0,),
                         host_cpu=host_cpu, running=3, workers=3, workers_cpu_percent=190.0, workers_busy=2)
    return snaps


def test_loader_advice_raises_num_workers_only_when_a_core_is_idle() -> None:
    idle = next(f for f in diagnose(_loader(20.0)) if f.code == "dataloader_bound")
    assert "raise DataLoader num_workers (up to the idle cores)" in idle.fix
    full = next(f for f in diagnose(_loader(100.0)) if f.code == "dataloader_bound")
    assert any("0.0 of 16 cores idle" in e for e in full.evidence)
    assert "raise DataLoader num_workers" not in full.fix and "no core is idle" in full.fix


def _copies(rx: float, tx: float, thread: float) -> list[Snapshot]:
    snaps = window(Load(util=10.0, sm=1.0, thread=thread, pcie_rx=rx))
    return [dataclasses.replace(s, gpus=(dataclasses.replace(s.gpus[0], profiling={"gpm": dataclasses.replace(
        s.gpus[0].profiling["gpm"], pcie_tx_bytes_s=tx)}),)) for s in snaps]


def test_copies_are_named_by_their_direction() -> None:
    assert top(_copies(8e9, 1e8, 100.0)) == "h2d_copies"
    assert top(_copies(1e8, 6e9, 100.0)) == "d2h_copies"


def test_pageable_copies_are_told_to_pin_and_pinned_ones_are_not() -> None:
    pageable = next(f for f in diagnose(_copies(8e9, 1e8, 100.0)) if f.code == "h2d_copies")
    assert "pin_memory=True" in pageable.fix and any("staged by this thread" in e for e in pageable.evidence)
    pinned = next(f for f in diagnose(_copies(45e9, 1e8, 30.0)) if f.code == "h2d_copies")
    assert any("pinned-memory rate" in e for e in pinned.evidence)
    assert "already pinned" in pinned.fix and "pin_memory=True" not in pinned.fix


def test_a_power_cap_is_info_whoever_runs_and_thermal_slowdown_a_warning() -> None:
    capped = diagnose(window(Load(util=100.0, sm=60.0, tensor=1.0, clock=1500.0, events=("power_cap",),
                                 power=699.0, thread=99.0)))
    assert next(f for f in capped if f.code == "throttled").severity == "info"
    hot = diagnose(window(Load(util=100.0, sm=96.0, tensor=40.0, clock=1500.0, events=("hw_thermal",))))
    assert next(f for f in hot if f.code == "throttled").severity == "warning"


def _tenants(util: float, shares: tuple[float, ...]) -> list[Snapshot]:
    snaps = window(Load(util=util, sm=util * 0.8, tensor=30.0, thread=30.0))
    out = []
    for s in snaps:
        procs = tuple(dataclasses.replace(s.processes[0], pid=500 + i, top_thread_id=500 + i, sm_util=share)
                      for i, share in enumerate(shares))
        out.append(dataclasses.replace(s, processes=procs))
    return out


def test_two_tenants_below_full_use_are_time_slicing_a_warning_once_they_contend() -> None:
    busy = diagnose(_tenants(73.0, (33.0, 48.0)))
    assert top_problem(busy).code == "time_slicing" and top_problem(busy).severity == "warning"  # type: ignore[union-attr]
    light = next(f for f in diagnose(_tenants(30.0, (12.0, 14.0))) if f.code == "time_slicing")
    assert light.severity == "info"
    assert "time_slicing" not in {f.code for f in diagnose(_tenants(99.0, (95.0, 11.0)))}  # one fills it alone


def test_a_process_share_cannot_exceed_what_the_gpu_was_busy() -> None:
    snaps = window(Load(util=0.0, sm=0.0, thread=0.0))
    snaps = [dataclasses.replace(s, processes=(dataclasses.replace(s.processes[0], sm_util=99.0 if i < 5 else 1.0,
                                                                   cpu_percent=0.0),))
             for i, s in enumerate(snaps)]  # the first NVML answer spanned a warm-up before the window
    assert summarise(snaps)[0].processes[0].sm_util_mean == pytest.approx(0.0)


def test_a_process_without_thread_data_is_judged_by_the_older_rules() -> None:
    snaps = window(Load(util=1.0, sm=0.2, thread=99.0))
    assert top(snaps) == "input_cpu_bound"
    assert HostSample(hostname="h").procs_running is None and ProcessSample(pid=1, gpu_index=0).thread_waits == ()
