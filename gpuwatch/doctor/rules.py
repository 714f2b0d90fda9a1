"""The rule list: each rule looks at one GPU's window and returns a Finding or None.

Order does not rank (severity and score do); it only keeps the output stable. ``healthy`` is not here:
the doctor adds it only when no rule warns.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuwatch.doctor.rules_feed import dataloader_bound, input_cpu_bound, launch_bound, off_cpu_wait, pcie_copies
from gpuwatch.doctor.rules_gpu import fp32_no_tensor, memory_bandwidth, small_kernels, throttled, time_slicing
from gpuwatch.doctor.rules_memory import memory_churn, memory_idle, memory_leak
from gpuwatch.doctor.rules_threads import demand_bound, gil_contention, host_cpu_contention
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.finding import Finding

Rule = Callable[[GpuWindow], Finding | None]

RULES: tuple[Rule, ...] = (
    memory_leak, memory_churn, pcie_copies, launch_bound, host_cpu_contention, gil_contention, input_cpu_bound,
    dataloader_bound, off_cpu_wait, demand_bound, time_slicing, small_kernels, fp32_no_tensor, memory_bandwidth,
    throttled, memory_idle)
