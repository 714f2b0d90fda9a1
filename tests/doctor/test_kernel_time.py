"""A feeding thread whose CPU goes to the kernel, not to its code: fresh memory mapped and zeroed each step (a
large buffer allocated afresh), or a storm of small system calls. For real, processes doing each, read by the
host source as the sampler reads them: the finding names the kernel's work and a fix that asks the kernel
less, not "move preprocessing into workers". Synthetic windows for what the rule yields to."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator

import pytest
from processes import python_child

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.window import summarise
from gpuwatch.model.snapshot import Snapshot

from .live import on_idle_gpu
from .synthetic import SITE, Load, native, py, thread, window

#: 256 MiB made and dropped per step: glibc maps it afresh each time, the kernel faults in and zeroes each page.
FRESH = "print('ready', flush=True)\nwhile True:\n    a = b'\\x01' * (256 << 20)\n    del a\n"
#: One-byte reads of a cached file: each a system call.
SYSCALLS = ("import os\nfd = os.open(os.__file__, os.O_RDONLY)\nprint('ready', flush=True)\n"
            "while True:\n    for i in range(1000): os.pread(fd, 1, i)\n")
#: Pure Python on a core: the kernel hardly involved.
PYTHON = "print('ready', flush=True)\nwhile True:\n    sum(i * i for i in range(10000))\n"


@pytest.fixture
def running(request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[str]]:
    with python_child(request.param) as proc:
        yield proc


@pytest.mark.serial  # a busy process measured against a share of a core: alone, after the parallel part
@pytest.mark.parametrize("running", [FRESH], indirect=True)
def test_memory_allocated_afresh_each_step_is_the_kernels_work_not_the_codes(running: subprocess.Popen[str]) -> None:
    snaps = on_idle_gpu(running.pid, polls=6, every_s=0.3)
    p = summarise(snaps)[0].processes[0]
    assert p.system_cpu is not None and p.cpu is not None and p.system_cpu >= 0.5 * p.cpu, (p.system_cpu, p.cpu)
    f = top_problem(diagnose(snaps))
    assert f is not None and f.code == "input_cpu_bound" and f.mechanism == "fresh_memory", f
    assert "mapping and zeroing fresh memory" in f.title
    assert any("minor page faults/s" in e and "in the kernel (system time)" in e for e in f.evidence), f.evidence
    assert "reuse" in f.fix and "worker processes" not in f.fix


@pytest.mark.serial  # a busy process measured against a share of a core: alone, after the parallel part
@pytest.mark.parametrize("running", [SYSCALLS], indirect=True)
def test_a_storm_of_small_system_calls_is_said_to_be_in_the_kernel(running: subprocess.Popen[str]) -> None:
    f = top_problem(diagnose(on_idle_gpu(running.pid, polls=6, every_s=0.3)))
    assert f is not None and f.code == "input_cpu_bound" and f.mechanism == "syscalls", f
    assert "strace -c" in f.fix


@pytest.mark.serial  # a busy process measured against a share of a core: alone, after the parallel part
@pytest.mark.parametrize("running", [PYTHON], indirect=True)
def test_python_on_a_core_is_not_the_kernels_work(running: subprocess.Popen[str]) -> None:
    f = top_problem(diagnose(on_idle_gpu(running.pid, polls=6, every_s=0.3)))
    assert f is not None and f.code == "input_cpu_bound" and f.mechanism is None, f
    assert all("in the kernel" not in e for e in f.evidence) and "worker processes" in f.fix


#: The line that allocates, under numpy: what py-spy shows of a thread faulting in a fresh array.
NUMPY_ALLOC = thread(native("_multiarray_umath.cpython-312-x86_64-linux-gnu.so", "PyArray_NewFromDescr"),
                     py(f"{SITE}/numpy/core/numeric.py", "ones"), py("app/batch.py", "make_batch"),
                     py("app/serve.py", "loop"), count=20)
PIN = thread(native("libcudart.so.13", "cudaHostRegister"), py(f"{SITE}/torch/cuda/memory.py", "cudart_register"),
             py("app/stage.py", "register_staging"), count=20)


def _in_kernel(load: Load, system: float, faults: float) -> list[Snapshot]:
    snaps = window(load)
    return [dataclasses.replace(s, processes=tuple(dataclasses.replace(p, cpu_system_percent=system,
                                                                       minor_faults_s=faults)
                                                   for p in s.processes)) for s in snaps]


def test_the_frames_keep_the_location_and_the_kernel_names_the_mechanism() -> None:
    f = top_problem(diagnose(_in_kernel(Load(util=5.0, sm=3.0, thread=100.0, stacks=(NUMPY_ALLOC,)), 85.0, 4e5)))
    assert f is not None and f.code == "input_cpu_bound" and f.mechanism == "fresh_memory", f
    assert f.locations[0][0] == "batch.py:make_batch"


def test_frames_that_name_a_kernel_heavy_mechanism_of_their_own_keep_it() -> None:
    """Page-locking host memory is system time too, but the allocator's frames say what it is."""
    snaps = _in_kernel(Load(util=5.0, sm=3.0, thread=100.0, stacks=(PIN,)), 85.0, 4e5)
    assert all(f.mechanism not in ("fresh_memory", "syscalls") for f in diagnose(snaps))


def test_system_time_of_other_threads_is_not_the_feeding_threads() -> None:
    """The process at 400 % (pool threads in the kernel), its feeding thread at 100 %: a quarter of its CPU."""
    snaps = _in_kernel(Load(util=5.0, sm=3.0, thread=100.0, cpu=400.0), 300.0, 4e5)
    assert all(f.mechanism not in ("fresh_memory", "syscalls") for f in diagnose(snaps))


def test_recordings_without_the_kernels_counters_are_judged_as_before() -> None:
    f = top_problem(diagnose(window(Load(util=5.0, sm=3.0, thread=100.0, stacks=(NUMPY_ALLOC,)))))
    assert f is not None and f.code == "input_cpu_bound" and f.mechanism == "host_op", f


def test_the_general_finding_names_the_kernels_work_at_the_line_its_frames_show() -> None:
    """Not pegged (the loop sleeps between batches), so no class fires: the general finding keeps the frames'
    location and says what the time there goes to, with the fix that asks the kernel less."""
    snaps = _in_kernel(Load(util=5.0, sm=3.0, thread=75.0, stacks=(NUMPY_ALLOC,)), 55.0, 2.9e4)
    f = top_problem(diagnose(snaps))
    assert f is not None and f.code == "idle_breakdown" and f.mechanism == "fresh_memory", f
    assert "batch.py:make_batch" in f.title and "mapping and zeroing fresh memory" in f.title
    assert any("its frames show where it asks, the kernel does the work" in e for e in f.evidence), f.evidence
    assert f.fix.startswith("Each step allocates large buffers afresh")


def test_a_thread_mostly_asleep_is_not_held_by_the_kernel_it_barely_uses() -> None:
    snaps = _in_kernel(Load(util=5.0, sm=3.0, thread=12.0, stacks=(NUMPY_ALLOC,)), 10.0, 2.9e4)
    assert all(f.mechanism not in ("fresh_memory", "syscalls") for f in diagnose(snaps))
