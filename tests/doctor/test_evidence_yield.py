"""Classes yield to the mechanism the stacks and the feeders show: a thread in the allocator is not
launching, a thread in a CPU op is not staging copies, storage-bound children are not busy loader workers,
and a thread waiting on children it spawns is held back by them. Stacks as py-spy gives them: standard
library files by their short path (``subprocess.py``), relative to ``sys.path``."""

from __future__ import annotations

import dataclasses

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.code_location import location
from gpuwatch.doctor.mechanisms import classify
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.model.stacks import ThreadStack

from .synthetic import SITE, Load, native, py, thread, window
from .test_evidence_rules import HOST_OP, PEGGED_LAUNCH_LOOKALIKE, QUEUE

COMMUNICATE = thread(native("libc.so.6", "poll"), py("selectors.py", "_PollLikeSelector.select"),
                     py("subprocess.py", "Popen._communicate"), py("subprocess.py", "Popen.communicate"),
                     py("app/tok.py", "tokenise_in_child"), py("app/main.py", "loop"), count=20)
ALLOCATING = thread(native("libc10_cuda.so", "c10::cuda::CUDACachingAllocator::Native::malloc"),
                    native("libtorch_cuda.so", "at::native::empty_cuda"),
                    py(f"{SITE}/torch/cuda/memory.py", "empty_cache"), py("train.py", "reallocate"), count=20)


def top(load: Load) -> Finding:
    found = top_problem(diagnose(window(load)))
    assert found is not None
    return found


def test_short_standard_library_paths_name_their_mechanism_and_are_not_the_users_code() -> None:
    assert classify(COMMUNICATE) == "subprocess"
    assert location(COMMUNICATE) == "tok.py:tokenise_in_child"


def test_a_pegged_thread_in_the_allocator_is_memory_churn_not_launch_bound() -> None:
    f = top(dataclasses.replace(PEGGED_LAUNCH_LOOKALIKE, stacks=(ALLOCATING,)))
    assert f.code == "memory_churn" and f.mechanism == "allocator", f
    assert f.locations[0][0] == "train.py:reallocate"


def test_pcie_traffic_beside_a_thread_in_a_cpu_op_is_not_a_copy_bottleneck() -> None:
    copying = Load(util=2.0, sm=0.2, thread=100.0, pcie_rx=7.2e8)
    assert top(copying).code == "h2d_copies"  # no stacks: the traffic is what /proc and NVML show
    f = top(dataclasses.replace(copying, stacks=(HOST_OP,)))
    assert f.code == "input_cpu_bound" and f.mechanism == "host_op", f


def test_storage_bound_worker_children_are_feeders_not_busy_loader_workers() -> None:
    writers = tuple(FeederSample(pid=930 + i, feeds=471, relation="child", name="python3", cpu_percent=18.0,
                                 top_thread_cpu_percent=14.0, thread_waits=("io", "io", "io", "lock"),
                                 threads_in_io_wait=1, io_write_bytes_s=1e9) for i in range(4))
    load = Load(util=1.0, sm=0.0, thread=17.0, workers=4, workers_cpu=55.0, stacks=(QUEUE,), feeders=writers)
    f = top(load)
    assert f.code == "feeder_bound" and "storage" in f.title, f


def test_a_thread_waiting_on_the_children_it_spawns_is_held_back_by_them() -> None:
    child = FeederSample(pid=940, feeds=471, relation="child", name="python3", cmdline="python3 -c tokenise")
    f = top(Load(util=5.0, sm=4.0, thread=2.0, stacks=(COMMUNICATE,), feeders=(child,)))
    assert f.code == "feeder_bound" and f.mechanism == "subprocess" and "subprocess" in f.title, f
    # without a child seen, the general finding still names the mechanism and the user's code
    f = top(Load(util=5.0, sm=4.0, thread=2.0, stacks=(COMMUNICATE,)))
    assert f.code == "idle_breakdown" and f.mechanism == "subprocess"
    assert f.locations[0][0] == "tok.py:tokenise_in_child"


def test_worker_children_starved_of_a_core_on_a_full_host_are_contention_not_a_busy_loader() -> None:
    def children(run_wait: float) -> tuple[FeederSample, ...]:
        return tuple(FeederSample(pid=950 + i, feeds=471, relation="child", name="python3", cpu_percent=50.0,
                                  top_thread_cpu_percent=50.0, thread_waits=("cpu",), run_wait_percent=run_wait)
                     for i in range(32))
    busy_host = Load(util=1.0, sm=0.3, thread=20.0, workers=32, workers_cpu=1575.0, host_cpu=100.0,
                     feeders=children(50.0))
    f = top(busy_host)
    assert f.code == "host_cpu_contention", f
    # the same children running whenever they want (a loader simply busy) stay the loader's finding
    assert top(dataclasses.replace(busy_host, feeders=children(0.0))).code == "dataloader_bound"


def test_a_busy_compile_worker_child_is_a_compiler_not_a_data_loader() -> None:
    worker = FeederSample(pid=960, feeds=471, relation="child", name="python3", cpu_percent=99.0,
                          top_thread_cpu_percent=99.0, thread_waits=("cpu",),
                          cmdline=f"python3 {SITE}/torch/_inductor/compile_worker/__main__.py --workers=16")
    load = Load(util=0.0, sm=0.0, thread=5.0, workers=1, workers_cpu=99.0, waits=("input",), feeders=(worker,))
    f = top(load)
    assert f.code == "feeder_bound" and "compile" in f.title, f
    plain = dataclasses.replace(worker, cmdline="python3 tokenise_worker.py")
    assert top(dataclasses.replace(load, feeders=(plain,))).code == "dataloader_bound"


RLOCK = thread(native("libc.so.6", "futex_wait"), py("threading.py", "RLock.acquire"), py("app/model.py", "forward"),
               count=20, idle=True)
RELOADING = thread(native("libtorch_cpu.so", "at::native::copy_"), py("app/model.py", "reload_weights"), tid=472,
                   count=20)
GIL_WAIT = thread(native("libpython3.11.so", "take_gil"), py("app/model.py", "tokenise"), count=20, idle=True)


def _two_threads_sharing_a_core(*stacks: ThreadStack) -> list[Snapshot]:
    """Two working threads at about half a core each, none pegged: what /proc shows of threads taking turns on the
    GIL, and as much of two threads taking turns on any lock."""
    snaps = window(Load(util=1.0, sm=0.5, thread=50.0, waits=("cpu",), stacks=stacks))
    return [dataclasses.replace(s, processes=tuple(dataclasses.replace(
        p, thread_cpu_percents=(50.0, 48.0), thread_waits=("cpu", "lock"), thread_run_wait_percents=(0.0, 0.0))
        for p in s.processes)) for s in snaps]


def test_threads_taking_turns_on_a_lock_held_by_a_native_op_are_not_gil_contention() -> None:
    assert top_problem(diagnose(_two_threads_sharing_a_core())).code == "gil_contention"  # /proc alone
    assert top_problem(diagnose(_two_threads_sharing_a_core(GIL_WAIT))).code == "gil_contention"
    found = diagnose(_two_threads_sharing_a_core(RLOCK, RELOADING))
    assert "gil_contention" not in [f.code for f in found], [f.code for f in found]
    f = top_problem(found)
    assert f is not None and f.mechanism == "lock" and any("a torch/numpy op on the CPU" in e for e in f.evidence)


PINNING = thread(native("libcuda.so.1", "cuMemHostRegister_v2"), native("libcudart.so.12", "cudaHostRegister"),
                 py("app/stage.py", "register_staging"), py("app/main.py", "loop"), count=20)


def test_page_locking_host_memory_per_batch_is_the_allocator_but_not_gpu_memory_churn() -> None:
    """A thread pinning host buffers every batch is in the allocator (the driver's work), yet no GPU memory
    comes or goes: the general finding names it, with the advice to pin once; memory churn does not fire."""
    assert classify(PINNING) == "allocator"
    found = diagnose(window(Load(util=10.0, sm=8.0, thread=90.0, stacks=(PINNING,))))
    assert "memory_churn" not in [f.code for f in found], [f.code for f in found]
    f = top_problem(found)
    assert f is not None and f.mechanism == "allocator" and f.locations[0][0] == "stage.py:register_staging", f
    assert "pin host buffers once" in f.fix
    churning = diagnose(window(Load(util=10.0, sm=8.0, thread=90.0, stacks=(ALLOCATING,))))
    assert "memory_churn" in [f.code for f in churning]


FUTURE = thread(native("libc.so.6", "futex_wait"), py("threading.py", "Condition.wait"),
                py("concurrent/futures/_base.py", "Future.result"), py("app/serve.py", "next_batch"),
                count=20, idle=True)
PRODUCING = thread(py("app/prep.py", "tokenise"), py("concurrent/futures/thread.py", "_WorkItem.run"), tid=472,
                   count=22)
LAUNCHING = thread(native("libcuda.so.1", "cuLaunchKernel"), py("app/serve.py", "forward"), count=2)


def test_a_gpu_thread_awaiting_a_pegged_producer_thread_is_input_bound_on_the_producers_code() -> None:
    """The thread that launches waits on a future a pool thread computes in Python at a full core: the producer
    feeds the GPU, so the GPU is input-bound on its code; a mutex held by a busy thread is not that."""
    found = diagnose(window(Load(util=3.0, sm=2.0, thread=100.0, stacks=(FUTURE, LAUNCHING, PRODUCING))))
    f = top_problem(found)
    assert f is not None and f.code == "input_cpu_bound", [x.code for x in found]
    assert "Python code" in f.title and "waits on" in f.title and f.locations[0][0] == "prep.py:tokenise"
    mutex = diagnose(window(Load(util=3.0, sm=2.0, thread=100.0, stacks=(RLOCK, LAUNCHING, RELOADING))))
    assert "input_cpu_bound" not in [x.code for x in mutex], [x.code for x in mutex]


GLOO = thread(native("libtorch_cpu.so", "gloo::AllreduceOptions::run"),
              py("torch/distributed/distributed_c10d.py", "all_reduce"), py("app/train.py", "sync_gradients"),
              count=20, idle=True)


def test_busy_children_of_a_thread_in_a_collective_are_its_peers_not_a_data_loader() -> None:
    """A rank child summing its share of an all-reduce is busy on a core, like a loader worker: the feeding
    thread's stacks in the collective say what it waits for."""
    loader = Load(util=20.0, sm=15.0, thread=20.0, workers=1, workers_cpu=95.0)
    assert top(loader).code == "dataloader_bound"
    found = diagnose(window(dataclasses.replace(loader, stacks=(GLOO,))))
    assert "dataloader_bound" not in [f.code for f in found], [f.code for f in found]
    assert top_problem(found) is not None and top_problem(found).mechanism == "collective"


def test_a_thread_in_d_state_most_of_the_time_waits_on_storage_whatever_frames_it_shows() -> None:
    """Page faults on a memory-mapped file: the stacks show the numpy gather that touched the page, the kernel
    shows the thread blocked on storage (D state) most of the time: a wait off the CPU, on storage."""
    faulting = Load(util=5.0, sm=4.0, thread=30.0, io_wait_threads=1, waits=("io",), stacks=(HOST_OP,))
    f = top(faulting)
    assert f.code == "off_cpu_wait" and "storage holds" in f.title, f
    computing = dataclasses.replace(faulting, thread=100.0, io_wait_threads=0, waits=("cpu",))
    assert top(computing).code == "input_cpu_bound"
