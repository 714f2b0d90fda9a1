"""Waits whose frames do not say so, read from what the kernel says: a thread in D state under numpy frames
takes page faults on a mapped file (storage); a thread blocked sending on a socket or a pipe waits on its peer,
never for demand; copies that come between a thread's waits in a collective are not what the GPU waits on.
And the code locations a finding carries are lines to open: a Python frame before a bare native address, the
feeders' own code pooled across the feeders it blames."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.code_location import location
from gpuwatch.doctor.current import window as last_seconds
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.finding import Finding
from gpuwatch.model.recording import load
from gpuwatch.model.stacks import StackSample
from gpuwatch.sources.stack_source import working

from .synthetic import SITE, STDLIB, Load, native, py, thread, window

FIXTURES = Path(__file__).parent / "fixtures" / "faults"

NUMPY_COPY = thread(native("libc.so.6", "0x7fd44c9a164d"),
                    native("_multiarray_umath.cpython-312-x86_64-linux-gnu.so", "_contig_to_contig"),
                    native("_multiarray_umath.cpython-312-x86_64-linux-gnu.so", "PyArray_NewCopy"),
                    py("weights.py", "read_columns"), py("serve.py", "step"), count=20)
#: The feeding thread at 30 % of a core, in D state the rest of the time, its process at 130 % (idle pool
#: threads spinning), reading 120 MB/s from storage with no read call: a mapped file faulting in.
FAULTING = Load(util=0.0, sm=0.0, thread=30.0, cpu=130.0, waits=("io",), io_wait_threads=1,
                channel="folio_wait_bit_common", read_bytes=1.2e8, read_chars=0.0, stacks=(NUMPY_COPY,))

LOG_SEND = thread(native("libc.so.6", "send"), py("socket.py", "SocketIO.write"),
                  py(f"{STDLIB}/logging/__init__.py", "StreamHandler.flush"), py("app/batches.py", "log_batch"),
                  py("app/serve.py", "loop"), count=20)
PIPE_WRITE = thread(native("libc.so.6", "write"), py("app/shards.py", "emit"), py("app/serve.py", "loop"), count=20)
RECV = thread(native("libc.so.6", "recv"), py("socket.py", "socket.recv_into"), py("app/server.py", "next_request"),
              count=20)
#: Asleep on a socket, as /proc shows a thread blocked in send (wait_woken) or a server awaiting a request.
ON_SOCKET = Load(util=0.0, sm=0.0, thread=2.0, waits=("input",), channel="wait_woken", upstream="external")

COLLECTIVE = thread(native("libc.so.6", "pthread_cond_wait"), native("libtorch_cpu.so", "c10d::Work::wait"),
                    py(f"{SITE}/torch/distributed/distributed_c10d.py", "broadcast"),
                    py("app/sync.py", "pull_parameters"), count=12)
HTOD = thread(native("libcuda.so.1", "cuMemcpyHtoDAsync_v2"), native("libcudart.so.13", "cudaMemcpyAsync"),
              py(f"{SITE}/torch/_tensor.py", "Tensor.to"), py("app/sync.py", "load_to_gpu"), count=8)
COPIES_BETWEEN_WAITS = Load(util=2.0, sm=0.0, thread=30.0, pcie_rx=9e8)


def top(load: Load) -> Finding:
    found = top_problem(diagnose(window(load)))
    assert found is not None
    return found


# -- page faults on a mapped file --------------------------------------------------------------------------

def test_a_thread_in_d_state_under_numpy_frames_waits_on_page_faults_of_a_mapped_file() -> None:
    f = top(FAULTING)
    assert f.code == "off_cpu_wait" and "page faults" in f.title, f
    assert f.mechanism == "storage" and f.locations[0][0] == "weights.py:read_columns"
    assert any("D state" in e and "70%" in e and "through read calls" in e for e in f.evidence), f.evidence
    assert "madvise" in f.fix and "mmap_mode" in f.fix


def test_the_major_fault_rate_names_the_faults_where_it_was_sampled() -> None:
    f = top(dataclasses.replace(FAULTING, major_faults=5000.0))
    assert f.code == "off_cpu_wait" and f.mechanism == "storage"
    assert any("5000 major page faults/s" in e for e in f.evidence), f.evidence


def test_storage_waits_without_major_faults_are_not_called_page_faults() -> None:
    """D state with no major fault counted (a read call, readahead): storage, but not a mapped file's faults,
    and the frames keep their mechanism."""
    f = top(dataclasses.replace(FAULTING, major_faults=0.0))
    assert f.code == "off_cpu_wait" and "page faults" not in f.title and f.mechanism == "host_op", f


def test_the_same_numpy_frames_on_a_core_are_a_cpu_op_not_storage() -> None:
    f = top(dataclasses.replace(FAULTING, thread=100.0, cpu=100.0, waits=("cpu",), io_wait_threads=0, channel=None,
                                read_bytes=None, read_chars=None))
    assert f.code == "input_cpu_bound" and f.mechanism == "host_op", f


def test_the_recorded_strided_reads_of_a_mapped_file_wait_on_storage() -> None:
    """Recorded on the H200 before major faults were sampled: the D state and the bytes read from storage with
    no read call say it."""
    f = top_problem(diagnose(last_seconds(load(FIXTURES / "mmap_strided_weights.ndjson.gz"), 10.0)))
    assert f is not None and f.code == "off_cpu_wait" and f.mechanism == "storage", f
    assert f.locations[0][0] == "fault_hidden.py:read_weight_columns"


# -- a peer that does not take what the thread sends -------------------------------------------------------

def test_a_thread_blocked_sending_to_a_socket_waits_on_its_peer_not_for_demand() -> None:
    f = top(dataclasses.replace(ON_SOCKET, stacks=(LOG_SEND,)))
    assert f.code == "off_cpu_wait" and "peer" in f.title, f
    assert f.mechanism == "network" and f.locations[0][0] == "batches.py:log_batch"
    assert "queue" in f.fix.lower()


def test_the_peer_is_named_where_it_was_found() -> None:
    collector = FeederSample(pid=980, feeds=471, relation="peer", name="collector", cpu_percent=1.0)
    f = top(dataclasses.replace(ON_SOCKET, stacks=(LOG_SEND,), feeders=(collector,)))
    assert f.code == "off_cpu_wait" and any("pid 980 (collector)" in e for e in f.evidence), f.evidence


def test_a_thread_blocked_writing_to_a_pipe_waits_on_its_reader() -> None:
    f = top(dataclasses.replace(ON_SOCKET, channel="pipe_write", upstream="tree", stacks=(PIPE_WRITE,)))
    assert f.code == "off_cpu_wait" and "peer" in f.title, f
    # its frames show a file write, but the kernel holds it on the pipe: the mechanism says the peer, as the title
    assert f.mechanism == "peer_send" and f.locations[0][0] == "shards.py:emit", f


def test_the_same_write_in_d_state_is_a_file_write_on_storage_not_a_peer() -> None:
    f = top(dataclasses.replace(ON_SOCKET, waits=("io",), io_wait_threads=1, channel="folio_wait_bit_common",
                                upstream=None, stacks=(PIPE_WRITE,)))
    assert f.code == "off_cpu_wait" and "storage" in f.title and "peer" not in f.title, f


def test_a_server_blocked_receiving_on_an_accepted_connection_still_waits_for_demand() -> None:
    f = top(dataclasses.replace(ON_SOCKET, stacks=(RECV,)))
    assert f.code != "off_cpu_wait", f


# -- copies between the waits of a collective --------------------------------------------------------------

def test_copies_between_a_threads_waits_in_a_collective_are_not_what_the_gpu_waits_on() -> None:
    f = top(dataclasses.replace(COPIES_BETWEEN_WAITS, stacks=(COLLECTIVE, HTOD)))
    assert f.code == "idle_breakdown" and f.mechanism == "collective", f
    assert f.locations[0][0] == "sync.py:pull_parameters"


def test_a_thread_copying_most_of_its_time_is_still_copy_bound_and_its_stacks_are_the_evidence() -> None:
    f = top(dataclasses.replace(COPIES_BETWEEN_WAITS, stacks=(dataclasses.replace(COLLECTIVE, count=8),
                                                              dataclasses.replace(HTOD, count=12))))
    assert f.code == "h2d_copies" and f.pid == 471, f
    assert f.locations[0][0] == "sync.py:load_to_gpu"


def test_without_stacks_the_pcie_traffic_is_what_is_known_and_the_finding_names_the_gpu_process() -> None:
    f = top(COPIES_BETWEEN_WAITS)
    assert f.code == "h2d_copies" and f.pid == 471 and f.locations == (), f


# -- code locations ----------------------------------------------------------------------------------------

def test_a_python_frame_is_a_code_location_before_a_bare_native_address() -> None:
    waiting = thread(native("libc.so.6", "0x7fb508a98e51"), py("threading.py", "Condition.wait"),
                     py("concurrent/futures/thread.py", "_worker"))
    assert location(waiting) == "threading.py:Condition.wait"
    assert location(thread(native("libc.so.6", "0x7f9ac2c2a1ca"), native("libc.so.6", "pread64"))) == \
        "libc.so.6:pread64"
    assert location(thread(native("libc.so.6", "0x7f9ac2c2a1ca"))) == "libc.so.6:0x7f9ac2c2a1ca"


def test_the_feeders_a_finding_blames_give_their_code_locations_ranked_across_all_of_them() -> None:
    """Two storage-bound children: the first (the busier) spends its few samples compacting, the second all of
    its many writing records; the finding's top location is where the feeders' time went together."""
    def child(pid: int, cpu: float) -> FeederSample:
        return FeederSample(pid=pid, feeds=471, relation="child", name="python3", cpu_percent=cpu,
                            top_thread_cpu_percent=cpu, thread_waits=("io", "io", "lock"), threads_in_io_wait=1,
                            io_write_bytes_s=1e9)
    queue = thread(native("libc.so.6", "read"), py("multiprocessing/connection.py", "Connection._recv"),
                   py("multiprocessing/queues.py", "Queue.get"), py("app/train.py", "next_batch"), count=20)
    snaps = window(Load(util=1.0, sm=0.0, thread=5.0, stacks=(queue,), feeders=(child(930, 20.0), child(931, 18.0))))
    compact = thread(native("libc.so.6", "fsync"), py("app/wal.py", "compact"), tid=930, count=10)
    write = thread(native("libc.so.6", "fsync"), py("app/wal.py", "write_record"), tid=931, count=30)
    snaps = [dataclasses.replace(s, stacks=(*s.stacks, StackSample(930, s.time, 1.0, (compact,), native=True),
                                            StackSample(931, s.time, 1.0, (write,), native=True))) for s in snaps]
    f = top_problem(diagnose(snaps))
    assert f is not None and f.code == "feeder_bound", f
    assert [loc for loc, _ in f.locations] == ["wal.py:write_record", "wal.py:compact"]
    assert f.locations[0][1] == 0.75


def test_a_feeder_in_storage_io_has_its_stacks_sampled_at_any_cpu() -> None:
    assert working(FeederSample(pid=930, feeds=471, relation="child", cpu_percent=5.0, threads_in_io_wait=1))
    assert working(FeederSample(pid=930, feeds=471, relation="child", cpu_percent=5.0, thread_waits=("io",)))
    assert working(FeederSample(pid=930, feeds=471, relation="child", cpu_percent=6.0, thread_waits=("other",),
                                io_read_bytes_s=2.8e7))  # random reads: each read short, the bytes still move
    assert working(FeederSample(pid=930, feeds=471, relation="child", cpu_percent=95.0))
    assert not working(FeederSample(pid=930, feeds=471, relation="child", cpu_percent=5.0, thread_waits=("lock",)))
