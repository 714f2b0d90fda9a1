"""Rules about GPU memory over the window: a leak (a steady climb), churn (large rises and falls), and
memory held while nothing runs.

Levels say little (the caching allocator keeps what it once needed); shapes say more. A leak is a fit
over every sample with its projected time to full; churn is the seed incident's "jitter": allocations
that come and go and cost a cudaMalloc/cudaFree and fragmentation each time.
"""

from __future__ import annotations

from gpuwatch.doctor.evidence import GIB, finding, gib, gpu_evidence
from gpuwatch.doctor.process_window import ProcessWindow
from gpuwatch.doctor.rules_evidence import STACK_MAJORITY
from gpuwatch.doctor.rules_feed import IO_RATE
from gpuwatch.doctor.scores import CHURN, LEAK, MEMORY_IDLE, MEMORY_OCCUPIED
from gpuwatch.doctor.trends import has_spike, linear_fit, swings
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.finding import Finding, Severity

LEAK_MIN_RISE = 0.5 * GIB  # over the window; and at least LEAK_MIN_SHARE of the GPU's memory
LEAK_MIN_SHARE = 0.005
LEAK_R2 = 0.85  # a staircase (a step every few seconds) fits a line too
LEAK_FALL = 0.05  # no drop larger than this share of the climb: a leak never gives memory back
LEAK_LOADING = 0.5  # PCIe RX at least this share of the climb: weights are being loaded, not leaked
LEAK_CRITICAL_S = 600.0  # full within 10 minutes
LEAK_URGENT_SPAN = 1.5  # horizons from which a leak's score starts rising (so the cut sits mid-slope)
CHURN_MIN = 1.0 * GIB  # a swing at least this large, and at least CHURN_MIN_SHARE of the GPU's memory
CHURN_MIN_SHARE = 0.05
CHURN_SWINGS = 3  # rises + falls in the window
CHURN_MIN_SAMPLES = CHURN_SWINGS + 1  # the fewest points that can show that many swings
CHURN_BIG_SHARE = 0.1  # one rise and fall this large (of the GPU's memory) within SPIKE_S counts already
SPIKE_S = 20.0
IDLE_BUSY = 5.0  # GPU-Util under which a GPU does nothing
IDLE_CPU = 5.0
IDLE_HELD = 1.0 * GIB
#: Bytes/s read from which a process holding memory is not idle: the GPU-waiting rules' ``IO_RATE``, the same
#: idea (a process that moves data while it waits is working).
IDLE_IO = IO_RATE
#: Share of the GPU's climb a process's own memory must make to be named as the one leaking.
LEAK_OWNER_SHARE = 0.5
GPU_MEM_OCCUPIED = 50.0
GPU_IDLE_UTIL = 20.0


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _urgency(left: float | None) -> float:
    """0 when memory would be full in 1.5 critical horizons or more (or never), 1 at half a horizon."""
    return 0.0 if left is None else min(1.0, max(0.0, LEAK_URGENT_SPAN - left / LEAK_CRITICAL_S))


def memory_leak(g: GpuWindow) -> Finding | None:
    total = g.mem_total_bytes
    fit = linear_fit(g.mem_used)
    if fit is None or not total:
        return None
    if fit.rise < max(LEAK_MIN_RISE, LEAK_MIN_SHARE * total) or fit.r2 < LEAK_R2:
        return None
    if fit.largest_fall > LEAK_FALL * fit.rise or (g.pcie_rx_bytes_s or 0.0) >= LEAK_LOADING * fit.slope:
        return None
    last = g.mem_used[-1][1]
    left = fit.seconds_to(float(total), last)
    growing = [p for p in g.processes
               if (pf := linear_fit(p.gpu_memory)) is not None and pf.rise >= LEAK_OWNER_SHARE * fit.rise]
    who = max(growing, key=lambda p: p.gpu_memory_bytes or 0.0) if growing else None
    severity: Severity = "critical" if left is not None and left < LEAK_CRITICAL_S else "warning"
    return finding(
        "memory_leak", "GPU memory leak: memory climbs steadily and is never given back", severity,
        LEAK(_urgency(left)), g,
        gpu_evidence(g, f"GPU memory +{fit.slope / GIB * 60:.1f} GiB/min over {g.seconds:.0f} s "
                     f"(linear fit R² {fit.r2:.2f}, never given back), now "
                     f"{gib(last)} of {gib(total)}",
                     None if left is None else f"full in about {_duration(left)} at this rate",
                     f"growing: {who.label}" if who else None),
        "Find what keeps references: tensors appended to a list every step (losses or outputs not "
        ".detach()ed or .item()ed), caches keyed by request without eviction, a KV cache that never shrinks. "
        "torch.cuda.memory._record_memory_history() then torch.cuda.memory._dump_snapshot() shows the "
        "allocation sites; a model still loading also climbs, and stops.", pid=who.pid if who else None)


def memory_churn(g: GpuWindow) -> Finding | None:
    total = g.mem_total_bytes
    if not total or len(g.mem_used) < CHURN_MIN_SAMPLES:
        return None
    amplitude = max(CHURN_MIN, CHURN_MIN_SHARE * total)
    rises, falls = swings(g.mem_used, amplitude)
    big = has_spike(g.mem_used, max(amplitude, CHURN_BIG_SHARE * total), SPIKE_S)
    # allocations too quick for the memory counter to see: the feeding thread's stacks in the allocator
    # (page-locking host memory is the allocator too, but no GPU memory comes or goes)
    alloc = next((p for p in g.processes if p.stacks is not None
                  and p.stacks.share("allocator") - p.stacks.pinning >= STACK_MAJORITY), None)
    if (rises + falls < CHURN_SWINGS or falls < 1) and not big and alloc is None:
        return None
    values = [v for _, v in g.mem_used]
    return finding(
        "memory_churn", "GPU memory churn: large allocations come and go", "warning", CHURN(), g,
        gpu_evidence(g, f"{rises} rises and {falls} falls of {gib(amplitude)} or more in {g.seconds:.0f} s "
                     f"(memory between {gib(min(values))} and {gib(max(values))})",
                     alloc.stacks.line(f"{alloc.label}, feeding thread") if alloc and alloc.stacks else None),
        "Keep memory steady: do not call torch.cuda.empty_cache() in the loop (let the caching allocator "
        "reuse blocks), pad inputs to a few bucketed shapes so blocks fit again, set "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation, and allocate large "
        "buffers once and reuse them.", pid=alloc.pid if alloc else None)


def _idle_process(g: GpuWindow, p: ProcessWindow) -> bool:
    """Holds memory and does nothing: no SM share of its own (or, unknown, an idle GPU), no CPU, no I/O,
    with its CPU measured over at least one interval (a first sample has no CPU rate: unknown, not idle)."""
    if p.cpu is None or p.samples < 2:
        return False
    if (p.gpu_memory_bytes or 0.0) < IDLE_HELD or p.cpu >= IDLE_CPU or (p.io_read_chars_s or 0.0) >= IDLE_IO:
        return False
    if p.sm_util_mean is not None:
        return p.sm_util_mean < 1.0
    return g.busy is not None and g.busy < IDLE_BUSY


def memory_idle(g: GpuWindow) -> Finding | None:
    """A process holding memory while it does nothing (or, without process data, a GPU whose memory is
    mostly taken while it idles)."""
    idle = [p for p in g.processes if _idle_process(g, p)]
    if idle:
        p = max(idle, key=lambda q: q.gpu_memory_bytes or 0.0)
        share = 100.0 * (p.gpu_memory_bytes or 0.0) / g.mem_total_bytes if g.mem_total_bytes else None
        return finding(
            "memory_idle", "Memory held by an idle process", "warning", MEMORY_IDLE(share or 0.0), g,
            gpu_evidence(g, f"{p.label} holds {gib(p.gpu_memory_bytes or 0.0)}"
                         + (f" ({share:.0f}% of the GPU)" if share is not None else "")
                         + f" for the whole window ({p.seconds:.0f} s) and uses none of it: CPU {p.cpu or 0:.0f}%"
                         + (f", SM share {p.sm_util_mean:.0f}%" if p.sm_util_mean is not None else "")),
            "If it should be serving, it gets no work: check its queue and the traffic routed to it. If it "
            "is done, end it (or free its memory: del the tensors, then torch.cuda.empty_cache()) so other "
            "jobs can use the GPU.", pid=p.pid)
    if g.busy is None:
        return None
    if g.mem_used_percent is None or g.mem_used_percent < GPU_MEM_OCCUPIED or g.busy >= GPU_IDLE_UTIL:
        return None
    return finding(
        "memory_idle", "Memory occupied but compute idle", "warning",
        MEMORY_OCCUPIED(g.mem_used_percent * (1.0 - g.busy / 100.0)), g,
        gpu_evidence(g, f"memory {g.mem_used_percent:.0f}% occupied"),
        "Memory use says nothing about work: the weights and the caching allocator hold it while the GPU "
        "waits. Look before the GPU (the CPU-side findings: preprocessing, copies, storage); if the process "
        "is idle, it holds memory other jobs could use.")
