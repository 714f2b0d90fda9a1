"""The doctor's classes: one entry per class, the only place a class is declared.

An entry gives the class's code, its rule (a function of one GPU's window, or for the two closing verdicts
the condition under which ``diagnose`` asks for it), its severity policy, whether it explains an
under-used GPU's idle time, whether it is info only, whether it is about a CPU thread (then the feeding
thread's stacks are quoted), the mechanisms (``mechanisms.py``) its premise is made of, and its one-line
doc. Every list the doctor and its readers use is derived from here: the rule order, the codes that
explain idle time, the thread findings, the info causes the accounting charges, the codes the
accounting knows (``model/causes.py`` holds the same codes as the model's fixed label set; a test keeps
them equal). A new class is one entry here and its rule function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from gpuwatch.doctor.rules_evidence import feeder_bound, long_kernels
from gpuwatch.doctor.rules_feed import dataloader_bound, input_cpu_bound, launch_bound, pcie_copies
from gpuwatch.doctor.rules_general import idle_breakdown
from gpuwatch.doctor.rules_gpu import fp32_no_tensor, healthy, memory_bandwidth, small_kernels, throttled, time_slicing
from gpuwatch.doctor.rules_memory import memory_churn, memory_idle, memory_leak
from gpuwatch.doctor.rules_offcpu import off_cpu_wait
from gpuwatch.doctor.rules_threads import demand_bound, gil_contention, host_cpu_contention
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.finding import HEALTHY, Finding

Rule = Callable[[GpuWindow], Finding | None]
#: When a closing verdict is asked for: ``unexplained``: no finding explains the GPU's idle time;
#: ``all_info``: every finding is info.
Closing = Literal["unexplained", "all_info"]


@dataclass(frozen=True)
class DoctorClass:
    code: str
    doc: str
    #: The rule; one rule may give several codes (``pcie_copies``: either direction), listed once.
    rule: Rule | None
    severity: str = "warning"
    explains_idle: bool = False
    info: bool = False
    thread: bool = False
    mechanisms: tuple[str, ...] = ()
    closing: Closing | None = None
    #: Codes this class's finding rules out on the same GPU (a leaking process is not idle).
    excludes: tuple[str, ...] = ()
    #: The bottleneck is the process's feeders: the finding's code locations are its busiest bound feeder's
    #: (where sampled), the code that keeps the GPU waiting.
    feeders: bool = False
    #: Where the GPU thread awaits a producer thread of its own process (a future, a queue) or waits for the GIL
    #: that its other threads hold, the finding's code locations are theirs: the code that keeps the GPU waiting.
    producer: bool = False


def _c(code: str, rule: Rule | None, doc: str, **kw: object) -> DoctorClass:
    return DoctorClass(code, doc, rule, **kw)  # type: ignore[arg-type]


#: In rule order (the order only keeps the output stable: severity and score rank).
CLASSES: tuple[DoctorClass, ...] = (
    _c("memory_leak", memory_leak, "GPU memory climbs steadily and is never given back",
       severity="critical when full within 10 minutes at the fitted rate, else warning (the score moves "
                "smoothly through the cut: live, 2 minutes of band)", excludes=("memory_idle",)),
    _c("memory_churn", memory_churn, "large allocations come and go (cudaMalloc/cudaFree, fragmentation)",
       mechanisms=("allocator",)),
    _c("h2d_copies", pcie_copies, "host-to-device copies over PCIe fill the GPU's time while its SMs idle",
       explains_idle=True, thread=True),
    _c("d2h_copies", None, "device-to-host copies over PCIe fill the GPU's time while its SMs idle",
       explains_idle=True, thread=True, mechanisms=("gpu_wait",)),
    _c("long_kernels", long_kernels, "a few long kernels: GPU-Util ~100 %, SM activity low, the host waiting "
       "for them (synchronize, a collective, polling an event): a kernel that does not finish, a stuck collective",
       explains_idle=True, thread=True, mechanisms=("gpu_wait", "collective", "sleep")),
    _c("launch_bound", launch_bound, "tiny kernels, one CPU thread launching them as fast as it can",
       explains_idle=True, thread=True, mechanisms=("launch", "python")),
    _c("host_cpu_contention", host_cpu_contention, "the feeding thread waits for a core: the host has none to "
       "spare, or the process's own CPU limit (a cgroup quota, its CPU affinity) is used up",
       explains_idle=True, thread=True),
    _c("gil_contention", gil_contention, "Python threads take turns on the GIL", explains_idle=True, thread=True,
       mechanisms=("python", "lock"), producer=True),
    _c("input_cpu_bound", input_cpu_bound, "the thread that feeds the GPU is busy on the CPU (Python, or a "
       "torch/numpy op on the CPU, as its stacks say; the kernel's work for it, as its system time says)",
       explains_idle=True, thread=True, producer=True,
       severity="critical under 20 % GPU-Util, else warning (live: held until the score moves 2 points past "
                "the cut, 5 points of GPU-Util)",
       mechanisms=("python", "host_op", "serialization", "compile", "fresh_memory", "syscalls")),
    _c("dataloader_bound", dataloader_bound, "data-loader workers are the bottleneck", explains_idle=True,
       thread=True, mechanisms=("lock",), feeders=True),
    _c("feeder_bound", feeder_bound, "the processes that feed the GPU process (children, siblings, pipe or socket "
       "peers) are the bottleneck: named, with what they are bound on", explains_idle=True, thread=True,
       mechanisms=("lock", "network", "subprocess"), feeders=True),
    _c("off_cpu_wait", off_cpu_wait, "waiting off the CPU: storage, network or a lock", explains_idle=True,
       thread=True, mechanisms=("storage", "network", "lock", "peer_send")),
    _c("demand_bound", demand_bound, "not a fault: the server waits for requests, the GPU has headroom",
       severity="info", explains_idle=True, info=True, thread=True, mechanisms=("network", "lock", "sleep")),
    _c("time_slicing", time_slicing, "processes take turns on the GPU", explains_idle=True, info=True,
       severity="warning once together they keep the GPU busy half the time, else info"),
    _c("small_kernels", small_kernels, "the GPU fed one request at a time: small kernels, per-request copies "
       "and syncs", explains_idle=True),
    _c("fp32_no_tensor", fp32_no_tensor, "matmuls in FP32 on the FP32 units, tensor cores idle"),
    _c("memory_bandwidth_bound", memory_bandwidth, "DRAM bandwidth, not compute, sets the pace"),
    _c("throttled", throttled, "clocks held down (power, thermal, hardware slowdown)"),
    _c("memory_idle", memory_idle, "memory held by an idle process, or occupied while compute idles",
       explains_idle=True),
    _c("idle_breakdown", idle_breakdown, "the general finding: no class explains the GPU's idle time, so where "
       "the feeding thread's time goes, by mechanism and code location", thread=True, producer=True,
       closing="unexplained"),
    _c(HEALTHY, healthy, "saturated and using tensor cores: nothing to fix", severity="info", info=True,
       closing="all_info"),
)


def codes(classes: Sequence[DoctorClass] = CLASSES) -> tuple[str, ...]:
    return tuple(c.code for c in classes)


def rules(classes: Sequence[DoctorClass] = CLASSES) -> tuple[Rule, ...]:
    """The window rules, each once, in table order (closing verdicts are not among them)."""
    out: list[Rule] = []
    for c in classes:
        if c.rule is not None and c.closing is None and c.rule not in out:
            out.append(c.rule)
    return tuple(out)


def explains_idle(classes: Sequence[DoctorClass] = CLASSES) -> frozenset[str]:
    return frozenset(c.code for c in classes if c.explains_idle)


def thread_findings(classes: Sequence[DoctorClass] = CLASSES) -> frozenset[str]:
    return frozenset(c.code for c in classes if c.thread)


def info_causes(classes: Sequence[DoctorClass] = CLASSES) -> frozenset[str]:
    """Info findings that still say where a GPU's time goes (the accounting charges them)."""
    return frozenset(c.code for c in classes if c.info and c.explains_idle)


def feeder_findings(classes: Sequence[DoctorClass] = CLASSES) -> frozenset[str]:
    return frozenset(c.code for c in classes if c.feeders)


def producer_findings(classes: Sequence[DoctorClass] = CLASSES) -> frozenset[str]:
    return frozenset(c.code for c in classes if c.producer)


def excludes(classes: Sequence[DoctorClass] = CLASSES) -> dict[str, tuple[str, ...]]:
    return {c.code: c.excludes for c in classes if c.excludes}


def closing(when: Closing, classes: Sequence[DoctorClass] = CLASSES) -> tuple[DoctorClass, ...]:
    return tuple(c for c in classes if c.closing == when)


BY_CODE = {c.code: c for c in CLASSES}
