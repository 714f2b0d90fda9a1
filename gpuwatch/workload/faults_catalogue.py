"""The injected fault variants, the finding the doctor should rank first for each, and which half of them
chose the doctor's thresholds (no torch here: the CLI, validate and the tests read it).

Every class has at least three variants that differ in structure. The thresholds were chosen on the
``fit`` half only; the ``check`` half reports how the doctor does on work it was not fitted to.

The mechanism variants (``fault_mechanisms``, ``fault_device``, ``fault_feeders``, ``fault_waits``, and
``fault_hidden``, ``fault_hidden_peers``, ``fault_hidden_waits``: the garbage collector, Python data to tensors,
host memory pinned per batch, page faults on a mapped file, a network round trip, a slow log collector, a gloo
collective, a busy poll on an event, a thread pool waited on; ``fault_limits``: a cgroup quota and a CPU
affinity) also name
the mechanism the evidence should show (the vocabulary of the doctor's frame table) and the function of the
fault's own code that does the injected work, which should be among the evidence's top code locations; so do
the earlier variants whose injected work runs on the host in a function of their own. The mechanism
variants' check half's expectations were written with the programs, before any threshold was tuned on the
fit half.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Half = Literal["fit", "check"]


class Fault(NamedTuple):
    expected: str  # the finding code the doctor should rank first
    description: str
    half: Half
    #: A healthy program that looks like a fault (PCIe busy, FP32 tensors, power cap): it must get no warning.
    look_alike: bool = False
    #: What the feeding thread's (or the feeder's) time should go to, in the doctor's mechanism vocabulary.
    mechanism: str | None = None
    #: The fault's own Python function doing the injected work: it should be among the top 3 code locations.
    function: str | None = None


def _f(expected: str, description: str, half: Half, look_alike: bool = False) -> Fault:
    return Fault(expected, description, half, look_alike)


def _m(expected: str, description: str, half: Half, mechanism: str, function: str) -> Fault:
    return Fault(expected, description, half, False, mechanism, function)


_CLASS_FAULTS: dict[str, Fault] = {
    "python_preprocess": _f("input_cpu_bound", "the thread that owns the GPU tokenises in Python between batches",
                            "fit"),
    "input_cpu_json": _f("input_cpu_bound", "the main thread decodes JSON and builds features per batch (FP16)", "fit"),
    "input_cpu_thread": _f("input_cpu_bound", "a worker thread (not main) tokenises and launches (FP32)", "check"),
    "gil_threads": _f("gil_contention", "four Python threads tokenise into a queue for the GPU loop", "fit"),
    "gil_pool": _f("gil_contention", "a pool of eight threads tokenises each batch (FP32)", "check"),
    "gil_json_thread": _f("gil_contention", "two threads parse JSON for a GPU loop on a third thread", "check"),
    "host_burners": _f("host_cpu_contention", "two busy processes per core beside a light feeding loop", "fit"),
    "host_worker_storm": _f("host_cpu_contention", "the feeder's own pool at three workers per core", "check"),
    "host_native_neighbour": _f("host_cpu_contention", "a neighbour keeps three threads per core busy in CPU matmuls",
                                "check"),
    "launch_bound": _f("launch_bound", "one thread launches thousands of tiny elementwise kernels", "fit"),
    "launch_row_loop": _f("launch_bound", "a Python loop indexes a GPU tensor row by row", "fit"),
    "launch_small_matmuls": _f("launch_bound", "hundreds of 32x32 BF16 matmuls per step", "check"),
    "pageable_h2d": _f("h2d_copies", "large host-to-device copies from pageable memory, little compute", "fit"),
    "h2d_small_batches": _f("h2d_copies", "sixteen 16 MiB pageable copies per step (FP16 work)", "check"),
    "h2d_numpy": _f("h2d_copies", "a numpy batch turned into a GPU tensor every step", "check"),
    "d2h_results": _f("d2h_copies", "each step's 256 MiB result copied back with .cpu()", "fit"),
    "d2h_many_small": _f("d2h_copies", "thirty-two 8 MiB results copied back one by one", "fit"),
    "d2h_numpy": _f("d2h_copies", "BF16 activations brought back as numpy arrays for a host reduction", "check"),
    "off_cpu_wait": _f("off_cpu_wait", "each batch waits on slow storage reads (sleeping, not computing)", "fit"),
    "off_cpu_checkpoint": _f("off_cpu_wait", "every step writes and fsyncs a checkpoint", "fit"),
    "off_cpu_reader_thread": _f("off_cpu_wait", "a reader thread with storage latency feeds a queue", "check"),
    "dataloader_workers": _f("dataloader_bound", "two DataLoader workers, each saturated, feed an idle GPU", "fit"),
    "process_pool": _f("dataloader_bound", "a multiprocessing pool of three decodes items", "fit"),
    "dataloader_four": _f("dataloader_bound", "four DataLoader workers with heavier items (FP32)", "check"),
    # demand_*: the requests come from a load generator outside the server's tree (detached, idle between
    # requests) through the server's front door: outside demand, and the GPU waits for it
    "demand_socket": _f("demand_bound", "a server waits in recv on a UDP socket for ~60 requests/s from a "
                        "detached client", "fit"),
    "demand_queue": _f("demand_bound", "a listener thread hands ~15 requests/s from a detached client's TCP "
                       "connection to the GPU loop through a queue (FP16)", "check"),
    "demand_bursty": _f("demand_bound", "a detached client sends bursts of 40 requests every 1.5 s on a TCP "
                        "connection, select between", "check"),
    "time_slicing": _f("time_slicing", "three processes share one GPU, each saturating it alone", "fit"),
    "slicing_unequal": _f("time_slicing", "a large FP16 job beside a small bursty one", "fit"),
    "slicing_two_bursty": _f("time_slicing", "two processes of GEMM bursts with pauses", "check"),
    "memory_leak": _f("memory_leak", "GPU memory grows about 1 GiB/s and is never freed", "fit"),
    "leak_small_tensors": _f("memory_leak", "4 MiB tensors kept per request in a dict", "fit"),
    "leak_slow": _f("memory_leak", "256 MiB/s kept while the GPU computes", "check"),
    "memory_churn": _f("memory_churn", "large allocations rise and fall every few seconds (empty_cache)", "fit"),
    "churn_fast": _f("memory_churn", "a quarter of free memory for 0.8 s every 2 s", "check"),
    "churn_shapes": _f("memory_churn", "batches of changing shape, GiBs of activations freed after", "check"),
    "fp32_matmul": _f("fp32_no_tensor", "large FP32 matmuls with TF32 off: tensor cores idle", "fit"),
    "fp32_bmm": _f("fp32_no_tensor", "batched FP32 matmuls, TF32 off", "fit"),
    "fp32_conv": _f("fp32_no_tensor", "FP32 convolutions, TF32 off in cuDNN", "check"),
    "dram_bound": _f("memory_bandwidth_bound", "large elementwise passes: DRAM bandwidth is the limit", "fit"),
    "dram_fp16_axpy": _f("memory_bandwidth_bound", "FP16 axpy passes over 4 GiB", "fit"),
    "dram_softmax": _f("memory_bandwidth_bound", "softmax over a 2 GiB tensor", "check"),
    "idle_memory": _f("memory_idle", "a process holds a fifth of GPU memory and does nothing", "fit"),
    "idle_small": _f("memory_idle", "a tenth of GPU memory held by a process asleep in select", "fit"),
    "idle_event": _f("memory_idle", "a quarter of GPU memory held while waiting on an event", "check"),
    "healthy": _f("healthy", "large BF16 matmuls: tensor cores busy, at the power cap", "fit", look_alike=True),
    "healthy_fp16_mlp": _f("healthy", "a large FP16 MLP forward pass", "check"),
    "healthy_tf32": _f("healthy", "FP32 tensors with TF32 matmuls: tensor cores do the work", "check",
                       look_alike=True),
    "pinned_overlap": _f("healthy", "pinned copies on a side stream overlapped with BF16 compute", "check",
                         look_alike=True),
}

#: Earlier variants whose injected work runs on the host in a function of their own: (mechanism or None where
#: their stacks could fairly show more than one, the function), scored like the mechanism variants'.
_HOST_WORK: dict[str, tuple[str | None, str]] = {
    "python_preprocess": ("python", "python_preprocess"), "input_cpu_thread": ("python", "tokenise"),
    "input_cpu_json": (None, "input_cpu_json"), "gil_threads": (None, "tokenise"), "gil_pool": (None, "tokenise"),
    "gil_json_thread": (None, "parse"), "launch_bound": ("launch", "launch_bound"),
    "launch_row_loop": ("launch", "launch_row_loop"), "launch_small_matmuls": ("launch", "launch_small_matmuls"),
    "off_cpu_checkpoint": ("storage", "off_cpu_checkpoint"), "dataloader_workers": (None, "__getitem__"),
    "dataloader_four": (None, "__getitem__"), "process_pool": (None, "_heavy_item"),
}
_CLASS_FAULTS = {name: f._replace(mechanism=_HOST_WORK[name][0], function=_HOST_WORK[name][1])
                 if name in _HOST_WORK else f for name, f in _CLASS_FAULTS.items()}

_MECHANISM_FAULTS: dict[str, Fault] = {
    # -- mechanisms no class was written for (fault_mechanisms, fault_device, fault_feeders, fault_waits) --
    # its feeding thread runs under half a core (it waits on inductor's compile workers the rest), so
    # input_cpu_bound's premise (a thread busy on the CPU) does not hold: the general finding names the compile
    "compile_shapes": _m("idle_breakdown", "torch.compile, static shapes, a batch size that never repeats: "
                         "every step recompiles", "fit", "compile", "recompile_step"),
    "compile_per_request": _m("input_cpu_bound", "a pipeline of ops chosen per request, compiled per request",
                              "check", "compile", "compile_request"),
    "long_kernel_sync": _m("long_kernels", "one 0.5 s single-thread kernel per step, the host in synchronize",
                           "fit", "gpu_wait", "wait_for_long_kernel"),
    "long_kernel_side_stream": _m("long_kernels", "a 0.8 s kernel on a side stream the main stream waits for, "
                                  "the host in .item()", "check", "gpu_wait", "wait_on_side_stream"),
    "long_kernel_graph_poll": _m("long_kernels", "a CUDA graph of one 0.6 s kernel per step, the host polling "
                                 "its event", "check", "sleep", "poll_until_done"),
    "feeder_fsync_procs": _m("feeder_bound", "three multiprocessing children fsync every record into a queue",
                             "fit", "storage", "write_through_storage"),
    "feeder_random_reads": _m("feeder_bound", "a child reads a file at random offsets, uncached, behind a pipe "
                              "(FP16)", "check", "storage", "random_reads"),
    # one CPU-bound worker child feeding its parent through a pipe is what dataloader_bound means (the class
    # table: busy workers, CPU-bound); feeder_bound is for feeders bound on anything else, or not children
    "feeder_python_pipe": _m("dataloader_bound", "a child process tokenises in Python behind a pipe", "fit",
                             "python", "tokenise_records"),
    "feeder_socket_peer": _m("feeder_bound", "a detached peer computes features in Python behind a local TCP "
                             "connection", "check", "python", "tokenise_records"),
    "lock_cache_refresh": _m("idle_breakdown", "a thread holds the table's Lock while it backs off (sleeps)",
                             "fit", "lock", "read_shared_table"),
    "lock_reload_rlock": _m("idle_breakdown", "a reloader holds an RLock while numpy sorts (GIL released), BF16",
                            "check", "lock", "forward_with_weights"),
    "sleep_throttle": _m("idle_breakdown", "a GPU loop throttled to 20 batches/s, its batches ready (BF16)", "fit",
                         "sleep", "throttle"),
    "sleep_poll_queue": _m("idle_breakdown", "a full queue polled with 20 ms sleeps instead of a blocking get",
                           "check", "sleep", "poll_for_batch"),
    "serialize_pickle_state": _m("input_cpu_bound", "200 000 session records pickled every step", "fit",
                                 "serialization", "snapshot_state"),
    "serialize_json_responses": _m("input_cpu_bound", "40 000 scored candidates encoded as JSON per step (BF16)",
                                   "check", "serialization", "encode_response"),
    "alloc_empty_cache": _m("memory_churn", "empty_cache() and 64 fresh buffers of new sizes every step",
                            "fit", "allocator", "reallocate_buffers"),
    "alloc_layerwise_free": _m("memory_churn", "the cache emptied between the layers of an FP16 model",
                               "check", "allocator", "forward_freeing_cache"),
    "subprocess_per_batch": _m("feeder_bound", "a Python interpreter started per batch to tokenise", "fit",
                               "subprocess", "tokenise_in_subprocess"),
    "subprocess_gzip": _m("feeder_bound", "each step's results piped through a gzip started for it (BF16)",
                          "check", "subprocess", "compress_with_tool"),
    "host_op_matmul": _m("input_cpu_bound", "the features are a CPU matmul (FP32) before a small GPU matmul",
                         "fit", "host_op", "featurize_on_cpu"),
    "host_op_fft": _m("input_cpu_bound", "numpy FFT spectrograms on the CPU before an FP16 GPU layer", "check",
                      "host_op", "spectrogram"),
    # -- host mechanisms no variant showed before (fault_hidden, fault_hidden_peers) --
    # the garbage collector is the interpreter's work on the feeding thread: busy on the CPU, in Python
    "gc_collect_per_batch": _m("input_cpu_bound", "gc.collect() after every batch beside a 600 000-record "
                               "cache", "fit", "python", "release_batch"),
    "gc_gen2_churn": _m("input_cpu_bound", "request trees with parent links outlive a few requests: automatic "
                        "full collections walk a large cache", "check", "python", "build_request_tree"),
    "tensor_from_nested_list": _m("input_cpu_bound", "torch.tensor of 512 x 2048 Python floats per batch",
                                  "fit", "host_op", "collate_rows"),
    "tensor_from_ndarray_list": _m("input_cpu_bound", "torch.tensor of a list of 256 numpy rows per batch (BF16)",
                                   "check", "host_op", "stack_features"),
    # page-locking host memory per batch: the driver's work, no GPU memory churn and no preprocessing to move
    # to workers, so no class fits; the general finding names the allocator (pin once, reuse)
    "pin_register_per_batch": _m("idle_breakdown", "a 256 MiB staging buffer cudaHostRegister-ed and "
                                 "unregistered around every copy", "fit", "allocator", "register_staging"),
    # the page-locking is done in register_staging (stage_state_dict only loops over the weights calling it)
    "pin_checkpoint_staging": _m("idle_breakdown", "each step's weights staged into freshly page-locked buffers "
                                 "(BF16)", "check", "allocator", "register_staging"),
    # major page faults on a mapped file: the thread waits in D state for storage, with no read() call
    "mmap_embedding_lookup": _m("off_cpu_wait", "random rows of a memory-mapped 512 MiB embedding table, its "
                                "pages dropped between batches", "fit", "storage", "lookup_rows"),
    "mmap_strided_weights": _m("off_cpu_wait", "column blocks of np.save-d weights, memory-mapped, pages "
                               "dropped between steps (FP16)", "check", "storage", "read_weight_columns"),
    # the peer (a detached process) is asleep, not bound on anything: the wait is the network round trip or
    # the socket's back-pressure, and the GPU process is the client, so it is no idle server either
    "http_feature_lookup": _m("off_cpu_wait", "an HTTP request per item to a feature store on 127.0.0.1 "
                              "answering in 20 ms", "fit", "network", "fetch_features"),
    "log_socket_backpressure": _m("off_cpu_wait", "45 KB of debug log per step to a TCP log collector that "
                                  "drains 400 KB/s (BF16)", "check", "network", "log_batch"),
    # a CPU collective: the GPU idle (not long_kernels' busy GPU), both ranks in gloo, neither one a feeder
    "gloo_allreduce_grads": _m("idle_breakdown", "a 64 MiB CPU embedding gradient all-reduced over gloo with a "
                               "second rank every step", "fit", "collective", "sync_gradients"),
    "gloo_broadcast_params": _m("idle_breakdown", "64 MiB of parameters broadcast over gloo from a CPU "
                                "parameter server every step (FP16)", "check", "collective", "pull_parameters"),
    # the thread that launches waits on a future; the pool's one thread, the GPU's feeder, is busy in Python
    "pool_future_wait": _m("input_cpu_bound", "each batch preprocessed in Python by a one-thread pool, its "
                           "future waited on at once", "fit", "python", "preprocess_batch"),
    # a core at 100 % polling an event is waiting for the GPU, not launching: a long kernel, not launch-bound
    "event_spin_long_kernel": _m("long_kernels", "one 0.4 s kernel per step whose end the host busy-polls with "
                                 "Event.query() (BF16)", "check", "gpu_wait", "spin_on_event"),
    # the process's own CPU limit, the host's cores idle: its threads wait for a core all the same (both fitted
    # on: the rule that reads the limit was written after a live run of each mistook it for the code's work)
    "cpu_quota_pool": _m("host_cpu_contention", "a cgroup quota of 2 cores under torch's CPU pool of one thread "
                         "per host core (BF16)", "fit", "host_op", "featurize_on_pool"),
    "affinity_pinned_pool": _m("host_cpu_contention", "pinned to 2 cores, torch's CPU pool of one thread per host "
                               "core (BF16)", "fit", "host_op", "featurize_on_pool"),
}

FAULTS: dict[str, Fault] = {**_CLASS_FAULTS, **_MECHANISM_FAULTS}

#: The variants of the mechanisms above: their recordings come from a later run than the earlier classes'.
MECHANISM_FAULTS: tuple[str, ...] = tuple(_MECHANISM_FAULTS)

def part(index: int, parts: int) -> list[str]:
    """Every ``parts``-th variant from the ``index``-th (1-based), the mechanism variants first: one device
    call's share of a recording run split over ``parts`` calls, with slow and fast variants spread evenly."""
    if not 1 <= index <= parts:
        raise ValueError(f"part {index} of {parts}: give a part from 1 to {parts}")
    names = list(FAULTS)[index - 1::parts]
    return sorted(names, key=lambda name: name not in MECHANISM_FAULTS)


#: Classes whose injected work runs on the GPU: the function named there only launches it and waits.
GPU_SIDE_CLASSES = ("long_kernels",)


def cpu_side(name: str) -> bool:
    """Whether the variant's injected work runs on the host, in the function it names (the code-location
    hit rate counts these)."""
    return FAULTS[name].function is not None and FAULTS[name].expected not in GPU_SIDE_CLASSES

#: The finding codes the variants exercise, in the order the report lists them.
CLASSES: tuple[str, ...] = tuple(dict.fromkeys(f.expected for f in FAULTS.values()))
