"""The rule list: each rule looks at one GPU's window and returns a Finding or None.

Order does not rank (severity and score do); it only keeps the output stable. ``healthy`` is not here:
the doctor adds it only when no rule warns.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuwatch.doctor.rules_feed import dataloader_bound, h2d_copies, input_cpu_bound, launch_bound, off_cpu_wait
from gpuwatch.doctor.rules_gpu import fp32_no_tensor, memory_bandwidth, small_kernels, throttled, time_slicing
from gpuwatch.doctor.rules_memory import memory_churn, memory_idle, memory_leak
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.finding import Finding

Rule = Callable[[GpuWindow], Finding | None]

RULES: tuple[Rule, ...] = (
    memory_leak, memory_churn, h2d_copies, launch_bound, input_cpu_bound, dataloader_bound, off_cpu_wait,
    time_slicing, small_kernels, fp32_no_tensor, memory_bandwidth, throttled, memory_idle)
