"""Frames to mechanisms: what a thread's time goes to, read off its sampled stacks by one declarative table.

Each entry names a mechanism (waiting on the GPU, the launch path, a host-side torch/numpy op, compiling,
storage, ...) by patterns on a frame's function, file and native module, the words a finding says it in,
and the advice it implies. A new mechanism is one new entry. A stack gets the mechanism of its
highest-priority matching frame (the table's order), so a futex inside ``cudaStreamSynchronize`` is a GPU
wait, not a lock, and Python frames under an inductor compile are compiling. A stack no entry matches is
interpreter work when it runs Python code, else unclassified; its frames still count as code locations
(``code_location``). A few mechanisms only the kernel can tell (``kernel_only``) have no pattern: a rule
names them from what /proc says.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from gpuwatch.doctor.code_location import user_frame
from gpuwatch.model.stacks import Frame, ThreadStack


@dataclass(frozen=True)
class Mechanism:
    name: str
    #: Regular expressions (searched, case-sensitive) on a frame's function, its file, its native module;
    #: ``files`` names modules whose every function is the mechanism, ``calls`` single ``file:function`` pairs
    #: (``threading.py:wait``: a thread's outermost ``threading.py:run`` is not a lock).
    functions: str = ""
    files: str = ""
    modules: str = ""
    calls: str = ""
    #: How a finding says it: "96% in model.py:step (<words>)".
    words: str = ""
    advice: str = ""
    #: The thread is waiting (off the CPU or spinning for another party), not computing.
    waiting: bool = False
    #: Only a running thread does it: an idle stack in the CUDA driver (its own helper threads poll there) is
    #: not launching, an idle OpenMP worker is not running an op.
    runs: bool = False
    #: A test on the whole stack, for a mechanism no single frame names (a wait on the GIL).
    stack: Callable[[ThreadStack], bool] | None = None
    #: Named by a rule from what the kernel says (a wait channel), never by frames: no frame tells a write into
    #: a full pipe from a write to a file. No stack is classified as it.
    kernel_only: bool = False

    def matches(self, f: Frame) -> bool:
        """A frame of the user's own code never names a mechanism (it is a code location): a function of
        theirs called ``read`` or ``get`` is not storage or a queue."""
        if user_frame(f):
            return False
        return bool((self.functions and re.search(self.functions, f.function))
                    or (self.files and f.file and re.search(self.files, f.file))
                    or (self.calls and f.file and re.search(self.calls, f"{f.file}:{f.function}"))
                    or (self.modules and f.module and re.search(self.modules, f.module)))


#: The frames that take the GIL back (``take_gil`` is static and inlined in Python 3.12+: its callers remain).
GIL_TAKING = re.compile(r"take_gil|PyEval_RestoreThread|PyEval_AcquireThread|PyGILState_Ensure|_PyThreadState_Attach"
                        r"|gil_scoped_acquire|gil_scoped_release")

#: The allocator's frames that page-lock host memory (cudaHostRegister, pinned allocations): the driver's work,
#: but no GPU memory comes or goes (``pins_host_memory``).
HOST_PINNING = re.compile(r"cudaHostRegister|cudaHostUnregister|cuMemHostRegister|cuMemHostUnregister|cudaHostAlloc"
                          r"|cudaMallocHost|cudaFreeHost|cuMemHostAlloc|cuMemAllocHost|cuMemFreeHost|HostAllocator"
                          r"|_pin_memory")

#: The lock waits that await another thread's result (a condition or event, a queue, a future), rather than a
#: mutex another thread holds: the thread consumes what a producer makes (``awaits_result``).
AWAITS_RESULT = re.compile(r"threading\.py:((Condition|Event)\.)?wait$|queue\.py:(Queue\.)?get$"
                           r"|concurrent/futures/_base\.py:((Future\.)?result|wait|as_completed)$"
                           r"|multiprocessing/(queues\.py:(Queue\.)?get|connection\.py:\w*recv\w*)$")

#: The lock waits that hand a result to a consumer that has not taken the last ones (a bounded queue's put): the
#: thread waits on what comes after it, never on what feeds it (``hands_off``).
HANDS_OFF = re.compile(r"(^|/)queue\.py:(Queue\.)?put$|multiprocessing/queues\.py:(Queue\.)?put$"
                       r"|asyncio/queues\.py:(Queue\.)?put$")

#: Network frames of a client library awaiting a reply to a request it sent (HTTP, gRPC): the process called a
#: service, it is not a server awaiting requests (``calls_service``).
SERVICE_CALL = re.compile(r"http/client\.py:|urllib/request\.py:|urllib3/|requests/|httpx/|aiohttp/client"
                          r"|grpc/_channel\.py:")

#: The sending side of a socket or a pipe (``sends_to_peer``): a thread blocked there waits for the other end to
#: take what it wrote (its send buffer or the pipe is full) or to accept its connection, never for work.
SENDS = re.compile(r"^(__libc_)?(send|sendto|sendmsg|sendmmsg|sendall|write|writev|connect)$|SSL_write|os\.write$"
                   r"|socket\.py:(\w+\.)?(write|send|sendall|sendto|sendmsg|connect|create_connection)$"
                   r"|multiprocessing/connection\.py:(\w+\.)?_?send(_bytes)?$")
#: The wait calls of a socket, a pipe or a file, whichever side (the innermost of them says which side it is).
_IO_CALL = re.compile(r"^(__libc_)?(recv\w*|send\w*|read|readv|write|writev|connect|accept4?|poll|select"
                      r"|epoll_wait)$|SSL_read|SSL_write|os\.(read|write)$")

#: Highest priority first: a stack is the first mechanism any of its frames matches.
MECHANISMS: tuple[Mechanism, ...] = (
    Mechanism("gpu_wait", functions=r"synchronize|cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize"
              r"|cuStreamSynchronize|cuEventSynchronize|cuCtxSynchronize|cudaMemcpy(?!Async)|_local_scalar_dense"
              r"|^item$|Tensor\.item|^tolist$|Tensor\.cpu|^cpu$|cudaEventQuery|cuEventQuery|cudaStreamQuery"
              r"|cuStreamQuery",
              calls=r"torch/cuda/streams\.py:(Event\.|Stream\.)?query$",
              words="waiting for the GPU (synchronize, .item(), .cpu(), polling an event)", waiting=True,
              advice="the thread blocks until the GPU finishes: drop per-step synchronize/.item()/.cpu() calls, "
                     "keep results on the GPU and read them back once per batch, or overlap the wait with the next "
                     "step's work"),
    Mechanism("collective", functions=r"^nccl|ProcessGroupNCCL|c10d::|gloo::", modules=r"libnccl",
              files=r"torch/distributed/distributed_c10d\.py$|torch/distributed/_functional_collectives",
              words="in a collective (NCCL, torch.distributed)", waiting=True,
              advice="the thread waits for its peers: find the slow rank (stragglers, uneven batches, a stuck "
                     "peer), overlap communication with compute, and set NCCL_DEBUG=INFO to see the ring"),
    Mechanism("compile", functions=r"ptxas|nvcc|nvrtc|compile_fx|compile_to_module|PTXCompile",
              files=r"torch/_inductor/(?!runtime/)|torch/_dynamo/(convert_frame|symbolic_convert|output_graph"
              r"|bytecode_transformation|variables/)|triton/compiler/|torch/_functorch/aot_autograd",
              modules=r"libnvrtc|libnvptxcompiler",
              words="compiling (torch.compile, inductor, triton)",
              advice="compilation runs in the request path: compile once at start-up (warm up every shape), "
                     "pad to a few fixed shapes so nothing recompiles (torch._dynamo recompile logs say why), and "
                     "cache compiled kernels (TORCHINDUCTOR_CACHE_DIR)"),
    Mechanism("allocator", functions=r"cudaMalloc|cudaFree|cuMemAlloc|cuMemFree|CUDACachingAllocator|empty_cache"
              r"|cuMemCreate|cuMemMap|" + HOST_PINNING.pattern,
              words="in the CUDA allocator (cudaMalloc/cudaFree, empty_cache, pinning host memory)",
              advice="allocations reach the driver: pin host buffers once and reuse them (no cudaHostRegister or "
                     "pin_memory() per batch), do not call torch.cuda.empty_cache() in the loop, reuse "
                     "buffers, pad to bucketed shapes, and set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
    Mechanism("launch", functions=r"cudaLaunchKernel|cuLaunchKernel|cudaLaunchCooperative|cuGraphLaunch"
              r"|launch_kernel|cudaGetLastError", modules=r"libtorch_cuda|libcudart|libcuda\.so|libc10_cuda",
              words="launching kernels (the CUDA launch path)", runs=True,
              advice="each step launches many small kernels: capture the step in CUDA graphs "
                     "(torch.compile(mode='reduce-overhead')), fuse elementwise ops, and batch more work per kernel"),
    Mechanism("subprocess", functions=r"^(__)?(waitpid|wait4)$|_execute_child|fork_exec|posix_spawn",
              files=r"subprocess\.py$|multiprocessing/popen",
              words="waiting on or spawning a child process", waiting=True,
              advice="a child process runs in the request path: start workers once and keep them (a pool), "
                     "and never spawn per item"),
    Mechanism("serialization", functions=r"^load$|^loads$|^dump$|^dumps$|_pickle|Unpickler|Pickler"
              r"|ParseFromString|SerializeToString|_load$|_save$|msgpack",
              files=r"pickle\.py$|json/|torch/serialization\.py$|msgpack|google/protobuf",
              words="serialising or deserialising (pickle, json, torch.save/load)",
              advice="objects are (de)serialised per item: send tensors through shared memory or pinned buffers "
                     "instead of pickling them, use a binary format, and load once"),
    Mechanism("file_lock", functions=r"(^|_)flock$|^lockf(64)?$",
              files=r"(^|/)filelock/|torch/utils/file_baton\.py$|(^|/)portalocker/|(^|/)fasteners/",
              words="waiting on a file lock another process holds (flock, a lock file)", waiting=True,
              advice="another process holds the file lock (the evidence names it where /proc/locks does): hold it "
                     "for less than a step, give each worker its own file or cache directory, and take the shared "
                     "work behind it (a download, a compile, a cache write) out of the request path"),
    Mechanism("network", functions=r"^(__libc_)?(recv|recvfrom|recvmsg|recv_into|send|sendto|sendmsg|sendall"
              r"|connect|accept4?)$|getaddrinfo|SSL_read|SSL_write|SSL_do_handshake|urlopen|getresponse|sock_recv"
              r"|sock_send|create_connection",
              files=r"socket\.py$|ssl\.py$|http/client\.py$|urllib3|requests/|httpx|aiohttp|grpc",
              modules=r"libssl|libgrpc", words="in network calls (sockets, HTTP)", waiting=True,
              advice="the thread waits on the network: take remote calls out of the GPU loop (prefetch, cache, "
                     "batch requests), and keep a connection pool"),
    Mechanism("input", files=r"selectors\.py$", stack=lambda s: waits_for_input(s),
              words="waiting for input (poll/select on sockets or pipes)", waiting=True,
              advice="the thread waits for input on a socket or a pipe: find what should send it (a client, a peer, "
                     "a child); a server without requests has the GPU's headroom"),
    Mechanism("storage", functions=r"^read$|^pread|^write$|^pwrite|fsync|fdatasync|^open$|^openat|__libc_read"
              r"|__libc_write|readinto|^mmap|os\.read|io_submit|io_uring",
              words="in file reads and writes (storage)", waiting=True,
              advice="the thread waits on storage: read ahead asynchronously (a prefetch thread or DataLoader "
                     "workers), cache inputs in memory or on local SSD, and batch small reads into large ones"),
    Mechanism("peer_send", kernel_only=True,
              words="blocked sending to a reader that does not keep up (a full pipe, socket or terminal)",
              waiting=True,
              advice="the other end of the pipe, socket or terminal does not take what the thread sends: move the "
                     "write off the GPU loop (a background thread with a bounded queue), send less, or make the "
                     "reader faster"),
    Mechanism("fresh_memory", kernel_only=True,
              words="in the kernel, mapping and zeroing fresh memory (minor page faults)",
              advice="each step allocates large buffers afresh, and the kernel maps and zeroes every page of them "
                     "(glibc returns blocks that large to it when they are freed): allocate them once and reuse them "
                     "(preallocated arrays, out= arguments, torch.empty once and copy_ into it), or keep freed memory "
                     "in the process (MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set high, jemalloc or "
                     "tcmalloc)"),
    Mechanism("syscalls", kernel_only=True, words="in the kernel (system calls)",
              advice="the thread's time goes to system calls, not its own code: strace -c -f -p PID counts them; "
                     "batch small reads and writes into large ones, and drop per-item open, stat and yield calls"),
    Mechanism("sleep", functions=r"nanosleep|clock_nanosleep|^sleep$|time\.sleep|usleep",
              words="in a timed sleep", waiting=True,
              advice="the thread sleeps on purpose: remove the sleep or the polling interval from the GPU loop"),
    Mechanism("python", functions=GIL_TAKING.pattern + "|drop_gil", stack=lambda s: waits_for_gil(s),
              words="Python code (the interpreter, or waiting for the GIL)",
              advice="the thread runs Python (or waits its turn on the GIL): move the work out of the thread "
                     "that feeds the GPU into worker processes, vectorise it with torch/numpy, or move it onto "
                     "the GPU"),
    Mechanism("lock", functions=r"futex|pthread_cond_(timed)?wait|pthread_mutex_lock|sem_(timed)?wait|lock_PyThread"
              r"|PyThread_acquire_lock",
              calls=r"threading\.py:(\w+\.)?(wait|acquire|join|_wait_for_tstate_lock)$|queue\.py:(\w+\.)?(get|put|join)$"
              r"|multiprocessing/(queues|synchronize|connection)\.py:[\w.]+$"
              r"|concurrent/futures/_base\.py:(\w+\.)?(result|wait)$",  # py-spy names methods Class.method
              words="waiting on a lock or a queue", waiting=True,
              advice="the thread waits for another thread or process to hand it work: find what fills the queue "
                     "or holds the lock; that is the bottleneck"),
    Mechanism("host_op", functions=r"at::native|at::cpu|mkl_|cblas_|gemm|GOMP_|__kmp|dnnl|mkldnn|PyArray|npy_"
              r"|ufunc|torch::utils::|internal_new_from_data|recursive_store",  # Python data made a tensor
              files=r"(^|/)(numpy|scipy|sklearn)/",
              modules=r"libtorch_cpu|_multiarray_umath|libopenblas|libmkl|libgomp|libiomp|libdnnl|libscipy",
              words="a torch/numpy op on the CPU", runs=True,
              advice="a tensor op runs on the CPU in the thread that feeds the GPU: move the tensor (and the op) "
                     "to the GPU, or into worker processes, and check for tensors created on the CPU by accident"),
)
BY_NAME = {m.name: m for m in MECHANISMS}
#: Interpreter work: the mechanism of a running stack with Python frames that no entry matches.
PYTHON = "python"

def words(mechanism: str | None) -> str:
    if mechanism is None:
        return "unclassified frames"
    return BY_NAME[mechanism].words if mechanism in BY_NAME else mechanism


def advice(mechanism: str | None) -> str:
    return BY_NAME[mechanism].advice if mechanism in BY_NAME else ""


def is_waiting(mechanism: str | None) -> bool:
    return mechanism in BY_NAME and BY_NAME[mechanism].waiting


#: The innermost frames of a thread blocked in the kernel on a condition variable: the C library's wait and the
#: unnamed addresses around it (static functions such as the interpreter's ``take_gil`` have no symbol).
_COND_WAIT = re.compile(r"^0x[0-9a-f]+$|pthread_cond_(timed|clock)?wait|futex|^syscall$")


_POLL = re.compile(r"^(__)?(poll|ppoll|select|pselect6?|epoll_wait|epoll_pwait2?)$")


def waits_for_input(stack: ThreadStack) -> bool:
    """Python code polls sockets or pipes for input (``select``, ``poll``, ``epoll``): a driver's helper thread
    polling with no Python frame is not the program waiting for work."""
    return any(f.native and _POLL.search(f.function) for f in stack.frames) \
        and any(not f.native and f.file for f in stack.frames)


def waits_for_gil(stack: ThreadStack) -> bool:
    """The thread takes the GIL back: a frame that does (``GIL_TAKING``), or a condition variable waited on
    straight from Python code with no lock API between: the interpreter taking the GIL back (``take_gil``,
    static and often inlined, so unnamed). A ``threading`` lock or queue shows ``PyThread_acquire_lock*`` or a
    waiting call (``Condition.wait``, ``Queue.get``) instead, which the lock entry names."""
    frames = stack.frames
    if any(f.native and GIL_TAKING.search(f.function) for f in frames):
        return True
    inner = 0
    while inner < len(frames) and frames[inner].native and _COND_WAIT.search(frames[inner].function):
        inner += 1
    if inner == 0 or inner == len(frames) or not any("cond" in f.function for f in frames[:inner]):
        return False
    caller = frames[inner]
    return not caller.native and bool(caller.file) and not any(
        m.matches(caller) for m in MECHANISMS if m.waiting)


def pins_host_memory(stack: ThreadStack) -> bool:
    """The stack page-locks or frees pinned host memory (an allocator stack that moves no GPU memory)."""
    return any(HOST_PINNING.search(f.function) for f in stack.frames if not user_frame(f))


def _library_call(stack: ThreadStack, pattern: re.Pattern[str]) -> bool:
    """A frame of a library (not the user's own code) whose ``file:function`` matches ``pattern``."""
    return any(pattern.search(f"{f.file}:{f.function}") for f in stack.frames if f.file and not user_frame(f))


def hands_off(stack: ThreadStack) -> bool:
    """The stack waits to put a result on a full queue: what takes them is slower than what makes them."""
    return _library_call(stack, HANDS_OFF)


def calls_service(stack: ThreadStack) -> bool:
    """The stack awaits the reply of a service it called (an HTTP or gRPC client)."""
    return _library_call(stack, SERVICE_CALL)


def sends_to_peer(stack: ThreadStack) -> bool:
    """The stack is blocked on the sending side of a socket or a pipe (or a file write: ``/proc`` tells which):
    its innermost I/O call sends, writes or connects."""
    for f in stack.frames:
        if user_frame(f):
            break
        label = f"{f.file}:{f.function}" if f.file else f.function
        if SENDS.search(f.function) or (f.file and SENDS.search(label)):
            return True
        if _IO_CALL.search(f.function):
            return False  # the innermost call reads or polls: it waits for data, not for the peer to take it
    return False


def awaits_result(stack: ThreadStack) -> bool:
    """The stack waits for a result another thread or process hands over (a queue, a future, an event)."""
    return _library_call(stack, AWAITS_RESULT)


@lru_cache(maxsize=4096)  # a live window re-reads the same few dozen stacks at every call
def classify(stack: ThreadStack, table: tuple[Mechanism, ...] = MECHANISMS) -> str | None:
    """The mechanism of one stack: its highest-priority matching frame's; else Python when it runs Python
    code; else None."""
    for m in table:
        if stack.idle and m.runs:
            continue
        if any(m.matches(f) for f in stack.frames) or (m.stack is not None and m.stack(stack)):
            return m.name
    if not stack.idle and any(not f.native and f.file for f in stack.frames):
        return PYTHON
    return None
