"""Fault variants where the feeding thread's state misleads: busy on the CPU while it only waits for the GPU,
or idle while the work it needs runs on another thread of its own process.

- gpu_wait, busy: the host spins on ``Event.query()`` (no sleep, no synchronize) while one long kernel runs:
  a core at 100 % in the CUDA runtime, no kernel launched, the GPU busy with a kernel that barely uses it.
- python, handed off: each batch's preprocessing submitted to a one-worker thread pool and waited for at once
  (``future.result()``), so the worker thread is busy in Python and the thread that launches waits on a lock.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpuwatch.workload.fault_device import _cycles_per_second, _spin
from gpuwatch.workload.fault_loop import Loop, Ready

# -- a busy poll on an event -------------------------------------------------------------------------------

def spin_on_event(torch: Any, dev: Any, done: Any, hz: float) -> int:
    """One 0.4 s kernel, then the host asks the event whether it is done, as fast as it can, until it is."""
    _spin(torch, dev, 0.4, hz)
    if done is None:
        return 0
    done.record()
    polls = 0
    while not done.query():
        polls += 1
    return polls


def event_spin_long_kernel(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A step of one long kernel whose end the host busy-polls with Event.query() (BF16 work after it)."""
    hz = _cycles_per_second(torch) if dev.type == "cuda" else 0.0
    done = torch.cuda.Event() if dev.type == "cuda" else None
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    w = torch.randn(512, 512, device=dev, dtype=dtype)
    loop = Loop(duration, on_ready)
    for _ in loop:
        spin_on_event(torch, dev, done, hz)
        (w @ w).sum().item()
    return loop.count


# -- preprocessing handed to a pool and waited for ---------------------------------------------------------

def preprocess_batch(texts: list[str]) -> list[float]:
    """Pure-Python preprocessing of one batch: words normalised, hashed and counted into 256 buckets."""
    buckets = [0.0] * 256
    for text in texts:
        for word in text.lower().split():
            buckets[hash(word.strip(".,;")) & 255] += 1.0 / (1 + len(word))
    return buckets


def pool_future_wait(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each batch's texts go to a one-thread pool; the GPU loop waits on the future straight away."""
    texts = [f"Request {i}: the quick brown fox, the lazy dog; item {i % 97}. " * 40 for i in range(400)]
    w = torch.randn(256, 1024, device=dev)
    loop = Loop(duration, on_ready)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="preprocess") as pool:
        for n in loop:
            features = pool.submit(preprocess_batch, texts[n % 2::2]).result()
            (torch.tensor(features, device=dev) @ w).sum().item()
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "event_spin_long_kernel": event_spin_long_kernel, "pool_future_wait": pool_future_wait,
}
