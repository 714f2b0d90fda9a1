"""Rules for a GPU that is busy but not doing its best: small kernels, FP32 without tensor cores, DRAM
bandwidth, clocks held down, processes taking turns; and the verdict that all is well.

Low SM occupancy alone is not among them: large tensor-core kernels keep few warps resident by design
(a healthy BF16 GEMM on the H200: 26 % occupancy at 96 % SM activity).
"""

from __future__ import annotations

from gpuwatch.doctor.evidence import finding, gpu_evidence, pct
from gpuwatch.doctor.rules_evidence import LONG_SM, LONG_UTIL, waits_on_gpu
from gpuwatch.doctor.rules_feed import BUSY_UTIL, HEALTHY_SM, is_launch_bound, pegged_processes
from gpuwatch.doctor.scores import BANDWIDTH, FP32, SMALL_KERNELS, THROTTLED, TIME_SLICE_PER_PROCESS, TIME_SLICING
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.clock_events import SEVERE_REASONS
from gpuwatch.model.finding import HEALTHY, Finding, Severity

SMALL_KERNELS_RATIO = 0.7  # SM activity / GPU-Util under which "busy" kernels leave SMs empty
GPU_BOUND_UTIL = 95.0
LOADED_SM = 50.0
TENSOR_IDLE = 2.0
FP32_BUSY = 20.0  # FP32 pipe activity from which matmuls run on the FP32 units (H200 FP32 GEMM: 76 %)
DRAM_BOUND = 60.0  # H200: elementwise passes 90 %, BF16 GEMM 20 %
THROTTLE_SHARE = 0.3
CLOCK_LOW = 0.93
SLICE_SM = 10.0  # mean per-process SM share from which a process really uses the GPU
SLICE_ALONE = 90.0  # a process with this share fills the GPU by itself: the others are not slicing it
SLICE_CONTENDED = 50.0  # GPU busy from which processes wait for each other's slices
HEALTHY_TENSOR = 10.0


def small_kernels(g: GpuWindow) -> Finding | None:
    """Busy but not full: kernels too small to fill the SMs, or gaps while one pegged thread syncs and
    launches request after request (GPU-Util short of 100 %)."""
    if g.util is None or g.sm_active is None or g.util < BUSY_UTIL or is_launch_bound(g):
        return None
    if waits_on_gpu(g) is not None and g.util >= LONG_UTIL and g.sm_active < LONG_SM:
        return None  # a few long kernels the host waits for (``long_kernels``), not small ones
    thin = g.sm_active < SMALL_KERNELS_RATIO * g.util
    pegged = pegged_processes(g)
    gappy = g.util < GPU_BOUND_UTIL and bool(pegged)
    if not (thin or gappy):
        return None
    extra = [f"GPU-Util {g.util:.0f}% but only {g.sm_active:.0f}% of SMs active: kernels too small to fill "
             "the GPU" if thin else None]
    if gappy:
        p = pegged[0]
        extra.append(f"{p.label}: busiest thread at {p.top_thread_cpu:.0f}% of one core while the GPU idles "
                     f"{100 - g.util:.0f}% of the time between requests")
    return finding(
        "small_kernels", "GPU fed one request at a time: small kernels, per-request copies and syncs", "warning",
        SMALL_KERNELS(100.0 - g.sm_active), g, gpu_evidence(g, *extra),
        "Batch requests: collect them for a few milliseconds into one batch per length bucket (padding to "
        "fixed lengths ends dynamic shapes), copy each batch once from pinned memory with non_blocking=True "
        "instead of a .cuda() per request, and keep the next batch in flight instead of syncing per request; "
        "then capture the forward pass in CUDA graphs or torch.compile to cut launch overhead.",
        pid=pegged[0].pid if gappy else None)


def _memory_bound(g: GpuWindow) -> bool:
    return g.dram_active is not None and g.dram_active >= DRAM_BOUND


def fp32_no_tensor(g: GpuWindow) -> Finding | None:
    if g.tensor_active is None or g.sm_active is None or g.sm_active < LOADED_SM or g.tensor_active >= TENSOR_IDLE:
        return None
    if (g.fp32_active is not None and g.fp32_active < FP32_BUSY) or _memory_bound(g):
        return None  # SMs busy with something else than FP32 math: memory, integer or FP16 work
    gpu_bound = g.util is None or g.util >= GPU_BOUND_UTIL  # with gaps in GPU-Util, fix the feeding first
    return finding(
        "fp32_no_tensor", "Matmuls in FP32: tensor cores idle under load", "warning" if gpu_bound else "info",
        FP32(g.sm_active), g, gpu_evidence(g, pct("FP32 pipe activity", g.fp32_active)),
        "Run the model in BF16 (or FP16): torch.autocast('cuda', dtype=torch.bfloat16) or "
        "model.to(torch.bfloat16), keeping LayerNorm and softmax in FP32; compare the outputs with FP32 on "
        "real inputs before shipping. TF32 (torch.backends.cuda.matmul.allow_tf32 = True) is a smaller step.")


def memory_bandwidth(g: GpuWindow) -> Finding | None:
    if not _memory_bound(g):
        return None
    dram = g.dram_active or 0.0
    return finding(
        "memory_bandwidth_bound", "Memory-bandwidth bound: DRAM, not the SMs, sets the pace", "warning",
        BANDWIDTH(dram), g, gpu_evidence(g, f"DRAM bandwidth {dram:.0f}% of peak", pct("FP32 pipe", g.fp32_active)),
        "Move fewer bytes per result: fuse elementwise ops (torch.compile), use BF16/FP16 or lower-precision "
        "weights and activations, avoid copies (in-place ops, no .contiguous() on hot paths), and batch larger "
        "so each weight read serves more requests.")


def time_slicing(g: GpuWindow) -> Finding | None:
    """Two or more processes each taking a share of one GPU, none of them filling it alone: their kernels
    never overlap, so each waits for the other's slices, at any utilisation. A warning once they contend
    (together they keep the GPU busy half the time or more); below that, each one's own feeding is what
    to fix first, and this is said as info."""
    users = sorted((p for p in g.processes if (p.sm_util_mean or 0.0) >= SLICE_SM),
                   key=lambda p: -(p.sm_util_mean or 0.0))
    if len(users) < 2 or g.busy is None or (users[0].sm_util_mean or 0.0) >= SLICE_ALONE:
        return None
    shares = ", ".join(f"{p.label} {p.sm_util_mean:.0f}%" for p in users)
    contended = g.busy >= SLICE_CONTENDED
    return finding(
        "time_slicing", f"{len(users)} processes take turns on one GPU (time-slicing)",
        "warning" if contended else "info", TIME_SLICING(g.busy) + TIME_SLICE_PER_PROCESS * len(users), g,
        gpu_evidence(g, f"mean SM share per process: {shares}",
                     "each process gets the GPU only in its time slices; kernels of different processes "
                     "never overlap, and every switch costs a context switch"),
        "Serve from one process with larger batches, or let the processes share the GPU concurrently with "
        "MPS (nvidia-cuda-mps-control -d), or split the GPU with MIG so each gets its own slice.",
        pid=users[0].pid)


def throttled(g: GpuWindow) -> Finding | None:
    if g.sm_clock_mhz is None or not g.sm_clock_max_mhz:
        return None
    ratio = g.sm_clock_mhz / g.sm_clock_max_mhz
    active = {r: s for r, s in g.clock_event_share.items()
              if s >= THROTTLE_SHARE and r in (*SEVERE_REASONS, "power_cap")}
    if not active or ratio >= CLOCK_LOW:
        return None
    severe = sorted(r for r in active if r in SEVERE_REASONS)
    reasons = ", ".join(f"{r} in {100 * s:.0f}% of samples" for r, s in sorted(active.items()))
    clock = f"SM clock {g.sm_clock_mhz:.0f} of {g.sm_clock_max_mhz:.0f} MHz ({100 * ratio:.0f}%)"
    power = None if g.power_w is None or g.power_limit_w is None else \
        f"power {g.power_w:.0f} W of {g.power_limit_w:.0f} W limit"
    severity: Severity
    if severe:
        severity = "warning"
        fix = ("Thermal or hardware slowdown: check cooling (airflow, inlet temperature, fans), the power "
               "supply and `nvidia-smi -q -d PERFORMANCE,TEMPERATURE`; a healthy GPU should not see it.")
    else:
        # the power limit is the board's design: under load the clock settles where it holds, whoever runs
        severity = "info"
        fix = ("At the power limit: expected under full load. Raise the limit if the board allows it "
               "(nvidia-smi -pl), or accept the clock; lower-precision math does more per watt.")
    return finding("throttled", "Clocks throttled: " + ("; ".join(severe) if severe else "power cap"),
                   severity, THROTTLED((1.0 - ratio) * 100.0 * max(active.values())), g,
                   gpu_evidence(g, clock, reasons, power), fix)


def healthy(g: GpuWindow) -> Finding | None:
    if g.sm_active is None or g.sm_active < HEALTHY_SM:
        return None
    if g.tensor_active is not None and g.tensor_active < HEALTHY_TENSOR:
        return None
    return finding(HEALTHY, "Saturated and using tensor cores" if g.tensor_active is not None else "Saturated",
                   "info", 0.0, g, gpu_evidence(g),
                   "Nothing to fix. Watch p99 latency and keep headroom: past ~85% SM activity queues grow fast.")
