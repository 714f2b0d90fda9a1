"""Classes yield to evidence: the sampled stacks and the feeders decide between look-alikes that /proc
alone cannot tell apart, and the general finding says where the time goes when no class fits."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.mechanisms import advice
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import SourceStatus

from .synthetic import SITE, STDLIB, Load, native, py, thread, window
from .test_mechanisms import STACKS

SYNC = thread(native("libcudart.so.12", "cudaStreamSynchronize"), py(f"{SITE}/torch/cuda/__init__.py", "synchronize"),
              py("bench.py", "step"), count=20)
HOST_OP = thread(native("libtorch_cpu.so", "at::native::addmm_impl_cpu_"),
                 py(f"{SITE}/torch/nn/modules/linear.py", "forward"), py("model.py", "preprocess"), count=24)
LAUNCH = thread(native("libcuda.so.1", "cuLaunchKernel"), py("model.py", "preprocess"), count=1)
QUEUE = thread(native("libc.so.6", "futex_wait"), py(f"{STDLIB}/queue.py", "get"), py("server.py", "next_batch"),
               count=20, idle=True)
EPOLL = thread(native("libc.so.6", "epoll_wait"), py(f"{STDLIB}/selectors.py", "select"), py("server.py", "serve"),
               count=20, idle=True)
COMPILE = thread(py(f"{SITE}/torch/_inductor/compile_fx.py", "compile_fx"), py("serve.py", "warm"), count=10)

PEGGED_LAUNCH_LOOKALIKE = Load(util=45.0, sm=3.0, thread=100.0)  # GPU-Util far above SM activity, a pegged thread
IDLE_SERVER = Load(util=5.0, sm=4.0, thread=2.0, channel="ep_poll")


def codes(findings: list[Finding]) -> list[str]:
    return [f"{f.severity}:{f.code}" for f in findings]


def top(load: Load) -> Finding:
    found = top_problem(diagnose(window(load)))
    assert found is not None
    return found


def test_without_stacks_the_pegged_thread_behind_a_busy_gpu_is_launch_bound_as_before() -> None:
    assert top(PEGGED_LAUNCH_LOOKALIKE).code == "launch_bound"


def test_a_thread_in_synchronize_is_not_launching_it_is_a_breakdown_with_the_gpu_wait() -> None:
    f = top(dataclasses.replace(PEGGED_LAUNCH_LOOKALIKE, stacks=(SYNC,)))
    assert f.code == "idle_breakdown" and f.mechanism == "gpu_wait", f
    assert f.locations[0] == ("bench.py:step", 1.0)
    assert "waiting for the GPU" in f.title and "synchronize" in f.fix


def test_gpu_always_busy_sms_nearly_empty_host_in_synchronize_is_a_few_long_kernels() -> None:
    f = top(Load(util=100.0, sm=2.0, thread=100.0, stacks=(SYNC,)))
    assert f.code == "long_kernels" and f.mechanism == "gpu_wait"
    assert not any(c.endswith(("launch_bound", "small_kernels")) for c in codes(diagnose(window(
        Load(util=100.0, sm=2.0, thread=100.0, stacks=(SYNC,))))))


def test_without_stacks_a_host_asleep_in_the_gpu_driver_behind_a_full_gpu_is_long_kernels_too() -> None:
    f = top(Load(util=100.0, sm=2.0, thread=5.0, waits=("gpu",)))
    assert f.code == "long_kernels" and f.mechanism is None
    assert any("waiting in the GPU driver" in e for e in f.evidence), f.evidence


def test_a_native_op_is_not_python_input_cpu_bound_names_the_op_and_the_users_function() -> None:
    f = top(Load(util=15.0, sm=12.0, thread=100.0, stacks=(HOST_OP, LAUNCH)))
    assert f.code == "input_cpu_bound" and f.mechanism == "host_op"
    assert "torch/numpy op on the CPU" in f.title and "Python" not in f.title
    assert f.locations[0][0] == "model.py:preprocess"
    assert any("100% in model.py:preprocess" in e and "96% a torch/numpy op" in e for e in f.evidence), f.evidence


def test_an_idle_server_with_outside_demand_and_no_feeder_is_demand_bound() -> None:
    f = top(dataclasses.replace(IDLE_SERVER, upstream="external", stacks=(EPOLL,)))
    assert f.code == "demand_bound" and f.severity == "info"


def test_a_server_fed_by_its_own_busy_children_is_feeder_bound_not_demand_bound() -> None:
    child = FeederSample(pid=900, feeds=471, relation="child", name="python3", cmdline="python3 tokenize_worker.py",
                         cpu_percent=99.0, top_thread_cpu_percent=99.0, thread_waits=("cpu",))
    load = dataclasses.replace(IDLE_SERVER, upstream="tree", stacks=(QUEUE,), feeders=(child,))
    found = diagnose(window(load))
    f = top_problem(found)
    assert f is not None and f.code == "feeder_bound" and f.severity == "warning", codes(found)
    assert "demand_bound" not in [x.code for x in found]
    assert "bound on cpu" in f.title and any("pid 900" in e and "tokenize_worker.py" in e for e in f.evidence)


def test_busy_loader_workers_seen_as_feeders_are_still_dataloader_bound() -> None:
    workers = tuple(FeederSample(pid=920 + i, feeds=471, relation="child", name="pt_data_worker", cpu_percent=95.0,
                                 top_thread_cpu_percent=95.0, thread_waits=("cpu",)) for i in range(4))
    loader = Load(util=20.0, sm=15.0, thread=20.0, workers=4, workers_cpu=380.0, stacks=(QUEUE,), feeders=workers)
    assert top(loader).code == "dataloader_bound"


def test_children_blocked_on_storage_are_not_demand() -> None:
    child = FeederSample(pid=901, feeds=471, relation="child", name="python3", cpu_percent=3.0,
                         top_thread_cpu_percent=3.0, thread_waits=("io",), threads_in_io_wait=1,
                         io_read_bytes_s=80e6)
    f = top(dataclasses.replace(IDLE_SERVER, stacks=(QUEUE,), feeders=(child,)))
    assert f.code == "feeder_bound" and "storage" in f.title


def test_compiler_workers_are_not_a_data_loader() -> None:
    loader = Load(util=20.0, sm=15.0, thread=20.0, workers=4, workers_cpu=380.0)
    assert top(loader).code == "dataloader_bound"
    compiler = FeederSample(pid=910, feeds=471, relation="child", name="python3", cpu_percent=95.0,
                            top_thread_cpu_percent=95.0)
    found = diagnose(window(dataclasses.replace(loader, stacks=(COMPILE,), feeders=(compiler,))))
    assert "dataloader_bound" not in [f.code for f in found], codes(found)


def test_without_stacks_the_breakdown_says_so_and_why() -> None:
    status = SourceStatus("stacks", "error", "ptrace not permitted: grant CAP_SYS_PTRACE")
    f = top(Load(util=10.0, sm=8.0, thread=30.0, stacks_status=status))
    assert f.code == "idle_breakdown" and f.mechanism is None
    assert any("stacks not available: ptrace not permitted" in e for e in f.evidence), f.evidence


def _server_windows(upstream: str | None) -> list[list[str]]:
    """An idle socket server whose feeding thread is seen waiting for input in 4, 5 or 6 of 10 samples (the
    rest asleep in an unknown place), window after window: the share wanders around the waiting cut."""
    out = []
    for k in (4, 5, 6, 5, 4, 6):
        snaps = window(Load(util=5.0, sm=4.0, thread=2.0, upstream=upstream))
        snaps = [dataclasses.replace(s, processes=tuple(dataclasses.replace(
            p, thread_waits=("input" if i < k else "other",), thread_cpu_percents=(2.0,)) for p in s.processes))
            for i, s in enumerate(snaps)]
        found = top_problem(diagnose(snaps))
        out.append([f"{found.severity}:{found.code}"] if found else [])
    return out


def test_an_idle_server_with_outside_demand_keeps_one_verdict_while_its_waiting_share_wanders() -> None:
    verdicts = _server_windows("external")
    assert all(v == ["info:demand_bound"] for v in verdicts), verdicts


@pytest.mark.parametrize("mechanism", sorted(STACKS))
def test_an_under_used_gpu_names_the_mechanism_and_the_users_function_its_feeding_thread_is_in(
        mechanism: str) -> None:
    """Whatever the mechanism, the top finding carries it and the user's function as the top code location,
    with the advice the mechanism implies."""
    stack, where = STACKS[mechanism]
    sampled = dataclasses.replace(stack, count=10)
    found = diagnose(window(Load(util=20.0, sm=15.0, thread=40.0, stacks=(sampled,))))
    f = top_problem(found)
    assert f is not None and f.mechanism == mechanism, [(x.code, x.mechanism) for x in found]
    assert f.locations[0] == (where, 1.0)
    if f.code == "idle_breakdown":
        assert where in f.title and advice(mechanism)[:30].lower() in f.fix.lower()


POLL = thread(native("libc.so.6", "clock_nanosleep"), py(f"{STDLIB}/time.py", "sleep"), py("bench.py", "wait_done"),
              count=20, idle=True)


def test_a_host_that_sleeps_between_polls_behind_a_full_gpu_waits_for_long_kernels_not_small_ones() -> None:
    """Polling an event with sleeps is waiting for the GPU as much as synchronize is: the kernels set the pace."""
    found = diagnose(window(Load(util=100.0, sm=1.0, thread=2.0, stacks=(POLL,))))
    f = top_problem(found)
    assert f is not None and f.code == "long_kernels" and f.mechanism == "sleep", codes(found)
    assert "sleeps between polls" in f.title and "synchronize" not in f.title
    assert "small_kernels" not in [x.code for x in found]


def test_without_stacks_a_host_asleep_on_a_timer_behind_a_full_gpu_is_long_kernels() -> None:
    f = top(Load(util=100.0, sm=1.0, thread=2.0, waits=("sleep",), channel="hrtimer_nanosleep"))
    assert f.code == "long_kernels" and "sleeps between polls" in f.title


def test_a_busy_host_thread_behind_a_full_gpu_on_few_sms_is_not_long_kernels() -> None:
    """The host on a core most of the time paces the GPU (launches, one request at a time): not long kernels."""
    for load in (Load(util=100.0, sm=2.0, thread=100.0), Load(util=100.0, sm=2.0, thread=100.0, stacks=(LAUNCH,))):
        assert "long_kernels" not in [x.code for x in diagnose(window(load))], load


RECV = thread(native("libc.so.6", "recv"), py(f"{STDLIB}/socket.py", "recv_into"), py("loader.py", "fetch"),
              count=20, idle=True)


def test_a_wait_off_the_cpu_says_what_it_waits_on_as_its_evidence_does() -> None:
    """Threads in D state alone say storage; the same process whose stacks sit in recv waits on the network."""
    blocked = Load(util=5.0, sm=4.0, thread=5.0, io_wait_threads=1)
    assert top(blocked).code == "off_cpu_wait" and "storage holds" in top(blocked).title
    f = top(dataclasses.replace(blocked, stacks=(RECV,)))
    assert f.code == "off_cpu_wait" and "the network holds" in f.title and "storage" not in f.title, f.title


def test_a_client_waiting_on_a_remote_service_is_a_wait_off_the_cpu_not_an_idle_server() -> None:
    """In recv on connections it opened (none accepted from outside), the process awaits a service: the wait
    holds the GPU back. The same thread with a connection accepted from outside is a server awaiting requests."""
    client = Load(util=5.0, sm=4.0, thread=3.0, channel="sk_wait_data", waits=("input",), stacks=(RECV,))
    found = diagnose(window(client))
    f = top_problem(found)
    assert f is not None and f.code == "off_cpu_wait" and "the network holds" in f.title, codes(found)
    assert "demand_bound" not in [x.code for x in found]
    server = top(dataclasses.replace(client, upstream="external"))
    assert server.code == "demand_bound" and server.severity == "info", server


def test_a_sleeping_process_beside_another_ones_kernels_is_not_waiting_for_long_kernels() -> None:
    """GPU-Util 100 % on few SMs, but the kernels in flight are not the sleeping process's own (its SM share is
    nil): it is idle beside someone else's work, not waiting for its kernels."""
    snaps = window(Load(util=100.0, sm=1.0, thread=2.0, stacks=(POLL,)))
    alone = [f.code for f in diagnose(snaps)]
    assert "long_kernels" in alone
    idle = [dataclasses.replace(s, processes=tuple(dataclasses.replace(p, sm_util=0.0) for p in s.processes))
            for s in snaps]
    assert "long_kernels" not in [f.code for f in diagnose(idle)]


def test_a_stream_consumer_whose_local_peer_is_busy_names_the_peer_not_demand_nor_the_network() -> None:
    """A process reading a TCP stream that a detached process on the same host computes in Python: once the
    peer is found (relation peer), it is the bottleneck, whatever the socket's direction said of upstream."""
    peer = FeederSample(pid=1080, feeds=471, relation="peer", name="python3", cmdline="python3 -m features --serve",
                        cpu_percent=99.0, top_thread_cpu_percent=99.0, thread_waits=("cpu",))
    consumer = Load(util=0.0, sm=0.0, thread=2.0, channel="wait_woken", waits=("input",), upstream="external",
                    stacks=(RECV,))
    assert top(consumer).code != "feeder_bound"  # the peer not found: where the time goes, in network calls
    found = diagnose(window(dataclasses.replace(consumer, feeders=(peer,))))
    f = top_problem(found)
    assert f is not None and f.code == "feeder_bound" and "bound on cpu" in f.title, codes(found)
    assert any("peer pid 1080" in e for e in f.evidence) and "demand_bound" not in [x.code for x in found]
