"""Fault variants where the feeding thread waits on something of its own process's making: a lock another
thread holds, a subprocess it starts for every batch, or its own sleep. Its stacks show only the wait (a
lock acquire, a child's pipe, time.sleep); what it waits for is the cause.

- lock: a refresher thread holds a ``threading.Lock`` while it polls (sleeping) for a new version of a table,
  or a reloader holds an ``RLock`` while numpy sorts its weights (the GIL released: the wait is the lock, not
  the GIL). Neither holder does I/O, so no storage wait explains it.
- subprocess (the child started for each batch is the feeder): a Python interpreter started per batch, or
  every batch piped through ``gzip``.
- sleep (the work is at hand, no request is awaited): a loop throttled to a fixed rate, or a queue polled
  with sleeps while a producer keeps it full.
"""

from __future__ import annotations

import hashlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuwatch.workload.fault_feeders import CHUNK, consume
from gpuwatch.workload.fault_loop import Loop, Ready

# -- a lock held by another thread -------------------------------------------------------------------------

class _Table:
    def __init__(self) -> None:
        self.lock, self.rows = threading.Lock(), [float(i) for i in range(256)]


def read_shared_table(table: _Table) -> list[float]:
    """The GPU loop's read of the shared table, under the lock the refresher holds while it persists it."""
    with table.lock:
        return list(table.rows)


def _refresh(table: _Table, stop: threading.Event) -> None:
    while not stop.is_set():
        with table.lock:  # waits for the next version holding the lock: every reader waits with it
            for _ in range(4):
                time.sleep(0.05)  # the source has no new version yet: poll again later
            table.rows[0] += 1.0
        time.sleep(0.001)


def lock_cache_refresh(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A refresher thread holds the table's Lock while it polls for a new version (sleeping 0.2 s); the GPU
    loop reads the table."""
    table, stop = _Table(), threading.Event()
    w = torch.randn(256, 256, device=dev)
    refresher = threading.Thread(target=_refresh, args=(table, stop), daemon=True)
    refresher.start()
    loop = Loop(duration, on_ready)
    for _ in loop:
        consume(torch, dev, w, read_shared_table(table))
    stop.set()
    return loop.count


def forward_with_weights(torch: Any, guard: threading.RLock, weights: dict[str, Any], x: Any) -> float:
    """One forward pass under the weights' RLock, which the reloader holds while it prepares new weights."""
    with guard:
        return float((x @ weights["w"]).sum().item())


def _reload(guard: threading.RLock, weights: dict[str, Any], stop: threading.Event) -> None:
    import numpy as np

    values = np.random.default_rng(0).standard_normal(8 << 20)
    while not stop.is_set():
        with guard:  # the sort runs in numpy with the GIL released: only the lock holds the GPU loop
            weights["order"] = np.sort(values)
        time.sleep(0.001)


def lock_reload_rlock(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A reloader thread holds an RLock while numpy sorts 8 M values; every forward takes the same RLock."""
    guard, stop = threading.RLock(), threading.Event()
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    weights = {"w": torch.randn(1024, 1024, device=dev, dtype=dtype)}
    x = torch.randn(64, 1024, device=dev, dtype=dtype)
    reloader = threading.Thread(target=_reload, args=(guard, weights, stop), daemon=True)
    reloader.start()
    loop = Loop(duration, on_ready)
    for _ in loop:
        forward_with_weights(torch, guard, weights, x)
    stop.set()
    return loop.count


# -- a subprocess per batch --------------------------------------------------------------------------------

def tokenise_in_subprocess(text: str) -> list[float]:
    """A tokeniser run as a fresh Python interpreter for every batch (a CLI tool called from the loop)."""
    code = "import sys; print(' '.join(str(len(t) % 7) for t in sys.stdin.read().split()[:256]))"
    out = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True, check=True)
    return [float(v) for v in out.stdout.split()]


def subprocess_per_batch(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each batch's text goes through a new Python process before a little GPU work."""
    w = torch.randn(256, 256, device=dev)
    text = "the quick brown fox jumps over the lazy dog " * 64
    loop = Loop(duration, on_ready)
    for _ in loop:
        consume(torch, dev, w, tokenise_in_subprocess(text))
    return loop.count


def compress_with_tool(result: Any) -> int:
    """The batch's results (a numpy array, with its checksum) piped through ``gzip``, an external tool started
    per batch, before they are stored."""
    data = result.tobytes()
    payload = hashlib.sha256(data).digest() * 8192 + data[:CHUNK * 2]
    return len(subprocess.run(["gzip", "-c", "-6"], input=payload, capture_output=True, check=True).stdout)


def subprocess_gzip(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each step's 4 MiB of results (BF16 compute) compressed by a gzip process started for it."""
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    w = torch.randn(1024, 1024, device=dev, dtype=dtype)
    x = torch.randn(1024, 1024, device=dev, dtype=dtype)
    loop = Loop(duration, on_ready)
    for _ in loop:
        compress_with_tool((x @ w).float().cpu().numpy())
    return loop.count


# -- sleeping with the work at hand ------------------------------------------------------------------------

def throttle(last: float, period: float) -> float:
    """Paces the loop to one batch per ``period`` (a limit left from sharing the host), asleep meanwhile."""
    time.sleep(max(0.0, last + period - time.monotonic()))
    return time.monotonic()


def sleep_throttle(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A GPU loop throttled to 20 batches/s with its batches ready: it sleeps, no one else holds it back."""
    w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16 if dev.type == "cuda" else torch.float32)
    x = torch.randn(64, 2048, device=dev, dtype=w.dtype)
    last = time.monotonic()
    loop = Loop(duration, on_ready)
    for _ in loop:
        (x @ w).sum().item()
        last = throttle(last, 0.05)
    return loop.count


def poll_for_batch(items: queue.Queue[list[float]]) -> list[float]:
    """Polls the queue and sleeps 20 ms whenever it finds it empty, instead of blocking on it."""
    while True:
        try:
            return items.get_nowait()
        except queue.Empty:
            time.sleep(0.02)


def sleep_poll_queue(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Batches arrive every 2 ms into a queue of two; the GPU loop polls it with 20 ms sleeps, so it empties
    the queue, finds it empty and sleeps ten arrivals long while the queue fills up and its source waits."""
    items: queue.Queue[list[float]] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set():
            time.sleep(0.002)  # the next batch arrives
            try:
                items.put([float(i % 7) for i in range(256)], timeout=0.1)
            except queue.Full:
                continue

    w = torch.randn(256, 256, device=dev)
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    loop = Loop(duration, on_ready)
    for _ in loop:
        consume(torch, dev, w, poll_for_batch(items))
    stop.set()
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "sleep_throttle": sleep_throttle, "sleep_poll_queue": sleep_poll_queue,
    "lock_cache_refresh": lock_cache_refresh, "lock_reload_rlock": lock_reload_rlock,
    "subprocess_per_batch": subprocess_per_batch, "subprocess_gzip": subprocess_gzip,
}
