"""The injected fault variants, the finding the doctor should rank first for each, and which half of them
chose the doctor's thresholds (no torch here: the CLI, validate and the tests read it).

Every class has at least three variants that differ in structure. The thresholds were chosen on the
``fit`` half only; the ``check`` half reports how the doctor does on work it was not fitted to.
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


def _f(expected: str, description: str, half: Half, look_alike: bool = False) -> Fault:
    return Fault(expected, description, half, look_alike)


FAULTS: dict[str, Fault] = {
    "python_preprocess": _f("input_cpu_bound", "the thread that owns the GPU tokenises in Python between batches",
                            "fit"),
    "input_cpu_json": _f("input_cpu_bound", "the main thread decodes JSON and builds features per batch (FP16)", "fit"),
    "input_cpu_thread": _f("input_cpu_bound", "a worker thread (not main) tokenises and launches (FP32)", "check"),
    "gil_threads": _f("gil_contention", "four Python threads tokenise into a queue for the GPU loop", "fit"),
    "gil_pool": _f("gil_contention", "a pool of eight threads tokenises each batch (FP32)", "check"),
    "gil_json_thread": _f("gil_contention", "two threads parse JSON for a GPU loop on a third thread", "check"),
    "host_burners": _f("host_cpu_contention", "two busy processes per core beside a light feeding loop", "fit"),
    "host_worker_storm": _f("host_cpu_contention", "the feeder's own pool at three workers per core", "check"),
    "host_native_neighbour": _f("host_cpu_contention", "a neighbour's CPU matmuls on three threads per core",
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
    "demand_socket": _f("demand_bound", "a server waits in recv for ~60 requests/s on a UDP socket", "fit"),
    "demand_queue": _f("demand_bound", "the GPU loop waits on an in-process queue, ~15 requests/s (FP16)",
                       "check"),
    "demand_bursty": _f("demand_bound", "bursts of requests through a pipe every 1.5 s, select between",
                        "check"),
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

#: The finding codes the variants exercise, in the order the report lists them.
CLASSES: tuple[str, ...] = tuple(dict.fromkeys(f.expected for f in FAULTS.values()))
