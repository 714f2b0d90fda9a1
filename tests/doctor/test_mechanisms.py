"""Frames to mechanisms: one stack of each mechanism, as py-spy reports them (Python and native frames,
innermost first), is classified by the table; the code location is the innermost frame of the user's code."""

from __future__ import annotations

import pytest

from gpuwatch.doctor.code_location import location
from gpuwatch.doctor.mechanisms import MECHANISMS, advice, classify, words
from gpuwatch.doctor.stack_window import process_stacks
from gpuwatch.model.stacks import StackSample, ThreadStack

from .synthetic import SITE, STDLIB, native, py, thread

#: One realistic stack per mechanism, and the user's function that the time is charged to.
STACKS: dict[str, tuple[ThreadStack, str]] = {
    "gpu_wait": (thread(native("libcudart.so.12", "cudaStreamSynchronize"),
                        py(f"{SITE}/torch/cuda/__init__.py", "synchronize"), py("train.py", "step"),
                        py("train.py", "main")), "train.py:step"),
    "collective": (thread(native("libnccl.so.2", "ncclAllReduce"),
                          py(f"{SITE}/torch/distributed/distributed_c10d.py", "all_reduce"),
                          py("ddp.py", "sync_grads")), "ddp.py:sync_grads"),
    "compile": (thread(py(f"{SITE}/torch/_inductor/compile_fx.py", "compile_fx"),
                       py(f"{SITE}/torch/_dynamo/eval_frame.py", "_fn"), py("serve.py", "warm")), "serve.py:warm"),
    "allocator": (thread(native("libc10_cuda.so", "c10::cuda::CUDACachingAllocator::Native::malloc"),
                         native("libtorch_cuda.so", "at::native::empty_cuda"), py("train.py", "make_buffers")),
                  "train.py:make_buffers"),
    "launch": (thread(native("libcuda.so.1", "cuLaunchKernel"), native("libtorch_cuda.so", "at::native::add_kernel"),
                      py("loop.py", "tiny_ops")), "loop.py:tiny_ops"),
    "subprocess": (thread(native("libc.so.6", "wait4"), py(f"{STDLIB}/subprocess.py", "communicate"),
                          py("media.py", "run_ffmpeg")), "media.py:run_ffmpeg"),
    "serialization": (thread(py(f"{STDLIB}/pickle.py", "load"), py("loader.py", "decode")), "loader.py:decode"),
    "storage": (thread(native("libc.so.6", "__libc_read"), py("loader.py", "read_shard"), idle=True),
                "loader.py:read_shard"),
    # a blocking flock() in libc (py-filelock's polling acquire: below)
    "file_lock": (thread(native("libc.so.6", "flock"), py("cache.py", "write_entry"), idle=True),
                  "cache.py:write_entry"),
    "network": (thread(native("libc.so.6", "recv"), py(f"{STDLIB}/socket.py", "recv_into"),
                       py(f"{SITE}/urllib3/response.py", "read"), py("client.py", "fetch_features"), idle=True),
                "client.py:fetch_features"),
    "input": (thread(native("libc.so.6", "poll"), py("server.py", "serve_forever"), idle=True),
              "server.py:serve_forever"),
    "sleep": (thread(native("libc.so.6", "clock_nanosleep"), py("poller.py", "wait_for_job"), idle=True),
              "poller.py:wait_for_job"),
    "python": (thread(native("libpython3.11.so", "take_gil"), py("tok.py", "encode")), "tok.py:encode"),
    "lock": (thread(native("libc.so.6", "futex_wait"), py(f"{STDLIB}/threading.py", "wait"),
                    py(f"{STDLIB}/queue.py", "get"), py("server.py", "next_batch"), idle=True), "server.py:next_batch"),
    "host_op": (thread(native("libtorch_cpu.so", "at::native::addmm_impl_cpu_"),
                       native("libtorch_cpu.so", "at::_ops::addmm::call"),
                       py(f"{SITE}/torch/nn/modules/linear.py", "forward"), py("model.py", "preprocess")),
                "model.py:preprocess"),
}


def test_a_lock_file_polled_with_sleeps_is_a_file_lock_not_a_sleep() -> None:
    polled = thread(native("libc.so.6", "clock_nanosleep"), py(f"{SITE}/filelock/_api.py", "acquire"),
                    py(f"{SITE}/huggingface_hub/file_download.py", "hf_hub_download"), py("serve.py", "load_model"),
                    idle=True)
    assert classify(polled) == "file_lock"
    assert location(polled) == "serve.py:load_model"


def test_every_mechanism_of_the_table_has_a_stack_here() -> None:
    assert sorted(STACKS) == sorted(m.name for m in MECHANISMS if not m.kernel_only)
    assert all(words(m.name) and advice(m.name) for m in MECHANISMS)
    # what only the kernel tells (a write held on a full pipe) has no pattern a frame could match
    assert all(not (m.functions or m.files or m.modules or m.calls or m.stack) for m in MECHANISMS if m.kernel_only)


@pytest.mark.parametrize("mechanism", sorted(STACKS))
def test_a_stack_is_its_mechanism_and_its_location_is_the_users_frame(mechanism: str) -> None:
    stack, where = STACKS[mechanism]
    assert classify(stack) == mechanism
    assert location(stack) == where


def test_interpreter_work_in_the_users_code_is_python_and_an_idle_unknown_stack_is_unclassified() -> None:
    assert classify(thread(py("prep.py", "normalise"), py("prep.py", "main"))) == "python"
    assert classify(thread(native("libc.so.6", "epoll_wait"), idle=True)) is None


def test_an_application_installed_with_pip_is_the_location_when_no_closer_frame_is_the_users() -> None:
    stack = thread(native("libtorch_cpu.so", "at::native::addmm_impl_cpu_"),
                   py(f"{SITE}/torch/nn/modules/linear.py", "forward"),
                   py(f"{SITE}/myapp/faults.py", "host_matmuls"), py(f"{STDLIB}/threading.py", "run"))
    assert classify(stack) == "host_op" and location(stack) == "faults.py:host_matmuls"
    mine = thread(py(f"{SITE}/myapp/util.py", "helper"), py("serve.py", "handle"))
    assert location(mine) == "serve.py:handle"


def test_running_compiled_code_or_a_thread_body_is_not_compiling_or_a_lock() -> None:
    compiled = thread(native("libtorch_cpu.so", "at::native::addmm_impl_cpu_"),
                      py(f"{SITE}/torch/_dynamo/eval_frame.py", "_fn"), py("serve.py", "infer"),
                      py(f"{STDLIB}/threading.py", "run"), py(f"{STDLIB}/threading.py", "_bootstrap_inner"))
    assert classify(compiled) == "host_op"
    assert classify(thread(py(f"{SITE}/numpy/lib/stride_tricks.py", "broadcast_to"), py("prep.py", "tile"))) \
        == "host_op"


def test_an_idle_thread_in_the_cuda_driver_is_not_launching_and_is_not_the_feeding_thread() -> None:
    helper = ThreadStack(480, (native("libc.so.6", "poll"), native("libcuda.so.1", "cuEGLApiInit")), 30, idle=True)
    assert classify(helper) is None
    busy = ThreadStack(471, STACKS["host_op"][0].frames, count=10)
    ev = process_stacks([StackSample(471, 1.0, 1.0, (helper, busy))], 471, top_tid=471)
    assert ev is not None and ev.tids == (471,) and ev.mechanism == "host_op"


def test_a_function_of_the_users_named_like_a_syscall_is_a_location_not_a_mechanism() -> None:
    assert classify(thread(py("mine.py", "read"), py("mine.py", "get"))) == "python"


def test_the_feeding_thread_is_the_one_that_touches_the_gpu_and_the_lock_holders_come_with_it() -> None:
    gpu, _ = STACKS["lock"]
    busy, _ = STACKS["host_op"]
    waits = ThreadStack(471, gpu.frames, count=8, idle=True)
    touches = ThreadStack(471, STACKS["launch"][0].frames, count=2)
    worker = ThreadStack(480, busy.frames, count=9)
    ev = process_stacks([StackSample(471, 1.0, 1.0, (waits, touches, worker))], 471, top_tid=480)
    assert ev is not None and ev.tids == (471,) and ev.mechanism == "lock"
    assert ev.share("lock") == pytest.approx(0.8) and ev.locations[0][0] == "server.py:next_batch"
    assert ev.holders is not None and ev.holders.mechanism == "host_op"
    assert ev.holders.top_locations(1) == (("model.py:preprocess", 1.0),)


def test_polling_an_event_or_a_stream_is_waiting_for_the_gpu() -> None:
    """``while not done.query()``: the host waits for the GPU as surely as in synchronize."""
    python = thread(py(f"{SITE}/torch/cuda/streams.py", "Event.query"), py("loop.py", "wait_done"))
    native_ = thread(native("libcudart.so.12", "cudaEventQuery"), py(f"{SITE}/torch/cuda/streams.py", "query"),
                     py("loop.py", "wait_done"))
    stream = thread(native("libcuda.so.1", "cuStreamQuery"), py("loop.py", "wait_done"))
    assert [classify(s) for s in (python, native_, stream)] == ["gpu_wait"] * 3
    assert location(python) == "loop.py:wait_done"


def test_python_data_made_into_a_tensor_is_a_host_op() -> None:
    """torch.tensor(list of floats): torch's native conversion walks the Python objects on the CPU."""
    stack = thread(native("libtorch_python.so", "torch::utils::(anonymous namespace)::recursive_store"),
                   native("libtorch_python.so", "torch::utils::internal_new_from_data"),
                   py("app/collate.py", "collate_rows"))
    assert classify(stack) == "host_op" and location(stack) == "collate.py:collate_rows"


#: A thread blocked on a condition variable, as py-spy shows it on Python 3.12 (take_gil is static and inlined:
#: the C library's wait sits under an unnamed interpreter address, or straight under the Python frame).
COND = (native("libc.so.6", "0x7f87f0898e51"), native("libc.so.6", "pthread_cond_timedwait"))


@pytest.mark.parametrize("stack", [
    thread(*COND, py("tok.py", "tokenise"), py("tok.py", "produce")),
    thread(*COND, native("libpython3.12.so", "0x7fb3fda6de1c"),
           py(f"{STDLIB}/concurrent/futures/thread.py", "_worker")),
    thread(*COND, native("libtorch_python.so", "pybind11::gil_scoped_release::~gil_scoped_release"),
           native("libtorch_python.so", "torch::utils::tensor_ctor"), py("feed.py", "batch")),
    thread(*COND, native("libtorch_python.so", "pybind11::gil_scoped_acquire::gil_scoped_acquire"),
           native("libtorch_cpu.so", "c10::TensorImpl::incref_pyobject"), py("feed.py", "batch")),
], ids=["under-python-code", "under-an-interpreter-address", "a-torch-op-taking-it-back", "a-torch-callback"])
def test_a_condition_wait_entered_from_python_code_or_a_gil_guard_is_waiting_for_the_gil(stack: ThreadStack) -> None:
    assert classify(stack) == "python"


@pytest.mark.parametrize("stack", [
    thread(*COND, py(f"{STDLIB}/threading.py", "wait"), py(f"{STDLIB}/concurrent/futures/_base.py", "result"),
           py("serve.py", "gather"), idle=True),
    thread(native("libc.so.6", "0x7f87f0898e51"), native("libpython3.12.so", "0x7f87f08a439e"),
           native("libpython3.12.so", "PyThread_acquire_lock_timed"), py(f"{STDLIB}/threading.py", "wait"),
           py(f"{STDLIB}/queue.py", "put"), py("tok.py", "produce"), idle=True),
    thread(native("libc.so.6", "0x7fb3fd898e51"), native("libc.so.6", "0x7fb3fd8a5098"),
           native("libpython3.12.so", "PyThread_acquire_lock_timed"), native("libpython3.12.so", "0x7fb3fda6de11"),
           py(f"{STDLIB}/concurrent/futures/thread.py", "_worker"), idle=True),
], ids=["a-future", "a-full-queue", "an-idle-pool-thread"])
def test_a_lock_or_queue_wait_is_a_lock_even_where_the_lock_api_frame_is_missing(stack: ThreadStack) -> None:
    assert classify(stack) == "lock"
