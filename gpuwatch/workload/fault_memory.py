"""Fault variants of GPU memory over time: slow leaks, churn (large allocations that come and go, handed
back with ``empty_cache``), and memory held by a process that does nothing. They mirror
``doctor/rules_memory.py``, which reads shapes over the window rather than levels.

Each class's variants differ in structure (one large tensor or many small ones, a fixed or a changing
shape, an event or ``select`` to sleep on), so a threshold fitted to one cannot carry the others by accident.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gpuwatch.workload.fault_loop import Loop, Ready, free_bytes

# -- memory shapes ---------------------------------------------------------------------------------------

def leak_slow(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """256 MiB/s kept in a per-request cache while the GPU also computes."""
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    kept: list[Any] = []
    budget = int(0.5 * free_bytes(torch, dev))
    loop = Loop(duration, on_ready)
    for _ in loop:
        if (len(kept) + 1) * (32 << 20) < budget:
            kept.append(torch.ones(8 << 20, device=dev))
        (w @ w).sum().item()
        time.sleep(0.125)
    return loop.count


def leak_small_tensors(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Many 4 MiB tensors kept in a dict keyed by request id (history never trimmed)."""
    kept: dict[int, Any] = {}
    budget = int(0.5 * free_bytes(torch, dev)) // (4 << 20)
    loop = Loop(duration, on_ready)
    for n in loop:
        for k in range(24):
            if len(kept) < budget:
                kept[n * 24 + k] = torch.randn(1 << 20, device=dev)
        time.sleep(0.1)
    return loop.count


def churn_fast(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A quarter of free memory taken for 0.8 s every 2 s, then handed back (empty_cache)."""
    size = int(free_bytes(torch, dev) / 4)
    loop = Loop(duration, on_ready)
    big = None
    for n in loop:
        phase = n % 20
        if phase == 0:
            big = torch.empty(size // 2, dtype=torch.float16, device=dev).fill_(1.0)
        elif phase == 8:
            big = None
            torch.cuda.empty_cache() if dev.type == "cuda" else None
        time.sleep(0.1)
    del big
    return loop.count


def churn_shapes(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Batches of changing shape: some steps need GiBs of activations, freed with empty_cache after."""
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    free = free_bytes(torch, dev)
    loop = Loop(duration, on_ready)
    for n in loop:
        rows = int(free * (0.3 if n % 30 < 10 else 0.02)) // (4096 * 2 * 2)
        x = torch.randn(rows, 4096, device=dev, dtype=torch.bfloat16)
        (x @ w).sum().item()
        del x
        if n % 30 in (10, 0):
            torch.cuda.empty_cache() if dev.type == "cuda" else None
        time.sleep(0.1)
    return loop.count


def idle_event(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A quarter of GPU memory held by a process that waits on an event that never comes."""
    held = torch.ones(int(free_bytes(torch, dev) / 4) // 4, device=dev)  # noqa: F841 - held on purpose
    never = threading.Event()
    loop = Loop(duration, on_ready)
    for _ in loop:
        never.wait(0.5)
    return loop.count


def idle_small(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A tenth of GPU memory (a loaded model) held by a process asleep in ``select``."""
    import select

    held = torch.ones(int(free_bytes(torch, dev) / 10) // 4, device=dev)  # noqa: F841 - held on purpose
    loop = Loop(duration, on_ready)
    for _ in loop:
        select.select([], [], [], 0.5)
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "leak_slow": leak_slow, "leak_small_tensors": leak_small_tensors,
    "churn_fast": churn_fast, "churn_shapes": churn_shapes, "idle_event": idle_event, "idle_small": idle_small,
}
