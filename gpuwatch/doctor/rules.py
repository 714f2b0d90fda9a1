"""The diagnosis rules: each looks at one GPU's window and says what holds it back, with numbers and a fix.

Thresholds come from what the H200 showed (reference/h200-probe-2026-12-02.log): a Python-bound naive
service ran at GPU-Util 2-3 % with its thread at 98 % of a core; a batched FP32 service showed GPU-Util
100 % yet SM occupancy 18.5 % and tensor activity 0.2 %; the BF16 version reached tensor 27 %, occupancy
51 %. Scores estimate how much of the GPU a problem costs (0-100) and rank the findings.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuwatch.doctor.window import GpuWindow, ProcessWindow
from gpuwatch.model.clock_events import SEVERE_REASONS
from gpuwatch.model.finding import Finding, Severity

BUSY_UTIL = 60.0  # GPU-Util under which the GPU spends much of its time waiting for work
PEGGED_THREAD = 85.0  # a thread at this share of one core is the limit of a single-threaded loop
SMALL_KERNELS_RATIO = 0.7  # SM activity / GPU-Util under which "busy" kernels leave SMs empty
GPU_BOUND_UTIL = 95.0  # GPU-Util from which the GPU itself is the bottleneck (the batched FP32 probe: 99-100)
LOADED_SM = 50.0  # SM activity from which the GPU is working hard
TENSOR_IDLE = 2.0  # tensor activity under which matmuls run without tensor cores (FP32)
DRAM_BOUND = 60.0
PCIE_RX_HIGH = 4e9  # bytes/s host -> device: an eighth of a PCIe 4 x16 link, sustained
THROTTLE_SHARE = 0.3
CLOCK_LOW = 0.93
IO_WAIT_SHARE = 0.3
HOST_IOWAIT = 10.0
MEM_OCCUPIED = 50.0
IDLE_UTIL = 20.0
HEALTHY_SM = 80.0
HEALTHY_TENSOR = 10.0


def _pct(name: str, value: float | None) -> str | None:
    return None if value is None else f"{name} {value:.1f}%"


def _evidence(g: GpuWindow, *extra: str | None) -> tuple[str, ...]:
    base = (_pct("GPU-Util", g.util), _pct("SM activity", g.sm_active), _pct("SM occupancy", g.sm_occupancy),
            _pct("tensor activity", g.tensor_active))
    return (*(e for e in (*extra, *base) if e), f"median of {g.samples} samples")


def _finding(code: str, title: str, severity: Severity, score: float, g: GpuWindow, evidence: tuple[str, ...],
             fix: str, pid: int | None = None) -> Finding:
    return Finding(code=code, title=title, severity=severity, score=round(max(0.0, min(100.0, score)), 1),
                   gpu_index=g.index, pid=pid, evidence=evidence, fix=fix)


def input_cpu_bound(g: GpuWindow) -> Finding | None:
    busy = g.busy
    pegged = _pegged(g)
    if busy is None or busy >= BUSY_UTIL or not pegged:
        return None
    p = max(pegged, key=lambda q: q.top_thread_cpu or 0.0)
    top = p.top_thread_cpu or 0.0
    thread = f"thread {p.top_thread_id}" if p.top_thread_id is not None else "its busiest thread"
    return _finding(
        "input_cpu_bound", "Input pipeline CPU-bound: one thread feeds the GPU and it is full",
        "critical" if busy < 30 else "warning", (100.0 - busy) * min(1.0, top / 100.0), g,
        _evidence(g, f"{p.label}: {thread} at {top:.0f}% of one core"),
        "Move preprocessing (tokenising, decoding, resizing) out of the serving thread into worker processes "
        "(DataLoader num_workers, or N processes feeding the GPU loop through a queue); the thread that owns "
        f"the GPU should only batch, copy and launch. See where it spends its time: py-spy dump --pid {p.pid}",
        pid=p.pid)


def _pegged(g: GpuWindow) -> list[ProcessWindow]:
    return [p for p in g.processes if p.top_thread_cpu is not None and p.top_thread_cpu >= PEGGED_THREAD]


def small_kernels(g: GpuWindow) -> Finding | None:
    """Busy but not full: kernels too small to fill the SMs, or gaps while one pegged thread syncs and
    launches request after request (GPU-Util short of 100 %)."""
    if g.util is None or g.sm_active is None or g.util < BUSY_UTIL:
        return None
    thin = g.sm_active < SMALL_KERNELS_RATIO * g.util
    pegged = _pegged(g)
    gappy = g.util < GPU_BOUND_UTIL and bool(pegged)
    if not (thin or gappy):
        return None
    extra = [f"GPU-Util {g.util:.0f}% but only {g.sm_active:.0f}% of SMs active: kernels too small to fill "
             "the GPU" if thin else None]
    if gappy:
        p = max(pegged, key=lambda q: q.top_thread_cpu or 0.0)
        extra.append(f"{p.label}: busiest thread at {p.top_thread_cpu:.0f}% of one core while the GPU idles "
                     f"{100 - g.util:.0f}% of the time between requests")
    return _finding(
        "small_kernels", "GPU fed one request at a time: small kernels, per-request copies and syncs", "warning",
        100.0 - g.sm_active, g, _evidence(g, *extra),
        "Batch requests: collect them for a few milliseconds into one batch per length bucket (padding to "
        "fixed lengths ends dynamic shapes), copy each batch once from pinned memory with non_blocking=True "
        "instead of a .cuda() per request, and keep the next batch in flight instead of syncing per request; "
        "then capture the forward pass in CUDA graphs or torch.compile to cut launch overhead.",
        pid=pegged[0].pid if gappy else None)


def h2d_copies(g: GpuWindow) -> Finding | None:
    rx = g.pcie_rx_bytes_s
    if rx is None or rx < PCIE_RX_HIGH or (g.sm_active is not None and g.sm_active >= HEALTHY_SM):
        return None
    return _finding(
        "h2d_copies", "Host-to-device copies dominate", "warning", min(60.0, 5.0 * rx / 1e9), g,
        _evidence(g, f"PCIe RX {rx / 1e9:.1f} GB/s (host to device)"),
        "Copy less and earlier: keep weights and reused tensors on the GPU, build batches in pinned memory "
        "and copy them with non_blocking=True (on a side stream to overlap with compute), send compact "
        "inputs (token ids, uint8 images) and expand them on the GPU.")


def fp32_no_tensor(g: GpuWindow) -> Finding | None:
    if g.tensor_active is None or g.sm_active is None:
        return None
    if g.sm_active < LOADED_SM or g.tensor_active >= TENSOR_IDLE:
        return None
    # Precision is the bottleneck only once the GPU is: with gaps in GPU-Util, fix the feeding first.
    gpu_bound = g.util is None or g.util >= GPU_BOUND_UTIL
    return _finding(
        "fp32_no_tensor", "Matmuls in FP32: tensor cores idle under load", "warning" if gpu_bound else "info",
        0.5 * g.sm_active, g,
        _evidence(g, _pct("FP32 pipe activity", g.fp32_active)),
        "Run the model in BF16 (or FP16): torch.autocast('cuda', dtype=torch.bfloat16) or "
        "model.to(torch.bfloat16), keeping LayerNorm and softmax in FP32; compare the outputs with FP32 on "
        "real inputs before shipping. TF32 (torch.backends.cuda.matmul.allow_tf32 = True) is a smaller step.")


def memory_bandwidth(g: GpuWindow) -> Finding | None:
    if g.dram_active is None or g.dram_active < DRAM_BOUND:
        return None
    return _finding(
        "memory_bandwidth_bound", "Memory-bandwidth bound", "warning", g.dram_active - 40.0, g,
        _evidence(g, f"DRAM bandwidth {g.dram_active:.0f}% of peak"),
        "Move fewer bytes per result: fuse elementwise ops (torch.compile), use BF16/FP16 or lower-precision "
        "weights, and batch larger so each weight read serves more requests.")


def io_wait(g: GpuWindow) -> Finding | None:
    waiting = [p for p in g.processes if p.io_wait_share is not None and p.io_wait_share >= IO_WAIT_SHARE]
    host = g.host_iowait is not None and g.host_iowait >= HOST_IOWAIT
    if not waiting and not host:
        return None
    if g.busy is not None and g.busy >= HEALTHY_SM:
        return None
    extra = [f"{p.label}: threads in IO wait (D state) in {100 * (p.io_wait_share or 0):.0f}% of samples"
             for p in waiting]
    if g.host_iowait is not None:
        extra.append(f"host iowait {g.host_iowait:.1f}%")
    share = max([p.io_wait_share or 0.0 for p in waiting] + [min(1.0, (g.host_iowait or 0) / 30.0)])
    return _finding(
        "io_wait", "Requests wait on storage (IO wait)", "warning", 20.0 + 50.0 * share, g, _evidence(g, *extra),
        "Take storage out of the request path: cache attachments and models in memory or on local SSD at "
        "start, prefetch asynchronously, and never read shared network storage per request.",
        pid=waiting[0].pid if waiting else None)


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
    if severe:
        severity: Severity = "critical"
        fix = ("Thermal or hardware slowdown: check cooling (airflow, inlet temperature, fans), the power "
               "supply and `nvidia-smi -q -d PERFORMANCE,TEMPERATURE`; a healthy GPU should not see it.")
    else:
        saturated = g.sm_active is not None and g.sm_active >= HEALTHY_SM
        severity = "info" if saturated else "warning"
        fix = ("At the power limit: expected under full load. Raise the limit if the board allows it "
               "(nvidia-smi -pl), or accept the clock; lower-precision math does more per watt.")
    return _finding("throttled", "Clocks throttled: " + ("; ".join(severe) if severe else "power cap"),
                    severity, (1.0 - ratio) * 100.0 * max(active.values()), g,
                    _evidence(g, clock, reasons, power), fix)


def memory_idle(g: GpuWindow) -> Finding | None:
    if g.mem_used_percent is None or g.mem_used_percent < MEM_OCCUPIED:
        return None
    if g.busy is None or g.busy >= IDLE_UTIL:
        return None
    return _finding(
        "memory_idle", "Memory occupied but compute idle", "warning",
        0.5 * g.mem_used_percent * (1.0 - g.busy / 100.0), g,
        _evidence(g, f"memory {g.mem_used_percent:.0f}% occupied"),
        "Memory use says nothing about work: the weights and the caching allocator hold it while the GPU "
        "waits. Look before the GPU (the CPU-side findings: preprocessing, copies, storage); if the process "
        "is idle, it holds memory other jobs could use.")


def healthy(g: GpuWindow) -> Finding | None:
    if g.sm_active is None or g.sm_active < HEALTHY_SM:
        return None
    if g.tensor_active is not None and g.tensor_active < HEALTHY_TENSOR:
        return None
    return _finding("healthy", "Saturated and using tensor cores" if g.tensor_active is not None else "Saturated",
                    "info", 0.0, g, _evidence(g),
                    "Nothing to fix. Watch p99 latency and keep headroom: past ~85% SM activity queues grow fast.")


#: Problem rules; ``healthy`` is added only when none of these warns.
RULES: tuple[Callable[[GpuWindow], Finding | None], ...] = (
    input_cpu_bound, small_kernels, h2d_copies, fp32_no_tensor, memory_bandwidth, io_wait, throttled, memory_idle)
