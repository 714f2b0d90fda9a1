"""Fault variants where a GPU waits on its feed: copies in each direction, kernels launched one tiny one at a
time, and storage the next batch waits on. They mirror ``doctor/rules_feed.py`` (what the GPU waits on).

Each class's variants differ in structure (direction, size, source of the data, a thread or the loop itself
waiting), so a threshold fitted to one cannot carry the others by accident.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuwatch.workload.fault_loop import Loop, Ready, sync

# -- copies ------------------------------------------------------------------------------------------------

def h2d_small_batches(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Sixteen 16 MiB pageable copies per step, each followed by a little FP16 work."""
    host = [torch.randn(4 << 20) for _ in range(4)]
    target = torch.empty(4 << 20, device=dev)
    loop = Loop(duration, on_ready)
    for n in loop:
        for k in range(16):
            target.copy_(host[(n + k) % 4])
            target.half().mul_(2)
        sync(torch, dev)
    return loop.count


def h2d_numpy(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A numpy array (pageable) turned into a GPU tensor every step, as a preprocessing pipeline does."""
    import numpy as np

    batch = np.random.default_rng(0).random((8192, 4096), dtype=np.float32)  # 128 MiB
    loop = Loop(duration, on_ready)
    for _ in loop:
        x = torch.from_numpy(batch).to(dev)
        x.mul_(0.5).sum().item()
    return loop.count


def d2h_results(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Every step's full result (256 MiB) copied back with ``.cpu()`` into pageable memory."""
    x = torch.randn(64 << 20, device=dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        x.mul_(1.0001)
        x.cpu()
    return loop.count


def d2h_numpy(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Activations (64 MiB, BF16 compute) brought back as numpy arrays for a host-side reduction."""
    w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    x = torch.randn(8192, 2048, device=dev, dtype=torch.bfloat16)
    loop = Loop(duration, on_ready)
    for _ in loop:
        y = (x @ w).float()
        for chunk in y.split(1024):
            chunk.cpu().numpy().max()
    return loop.count


def d2h_many_small(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Thirty-two 8 MiB results per step copied back one by one (per-request ``.cpu()``)."""
    xs = [torch.randn(2 << 20, device=dev) for _ in range(32)]
    loop = Loop(duration, on_ready)
    for _ in loop:
        for x in xs:
            x.add_(1.0).cpu()
    return loop.count


# -- launches ----------------------------------------------------------------------------------------------

def launch_small_matmuls(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Hundreds of 32x32 BF16 matmuls per step: each a kernel launch doing almost nothing."""
    a = torch.randn(32, 32, device=dev, dtype=torch.bfloat16)
    loop = Loop(duration, on_ready)
    for _ in loop:
        for _ in range(300):
            a = torch.tanh(a @ a)
        sync(torch, dev)
    return loop.count


def launch_row_loop(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A Python loop over rows that indexes a GPU tensor per row (one launch per row, per op)."""
    x = torch.randn(512, 256, device=dev)
    y = torch.empty_like(x)
    loop = Loop(duration, on_ready)
    for _ in loop:
        for i in range(512):
            y[i] = x[i] * 2.0 + 1.0
        sync(torch, dev)
    return loop.count


# -- storage waits -----------------------------------------------------------------------------------------

def off_cpu_reader_thread(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A reader thread reads uncached file chunks with storage latency; the GPU loop waits on its queue."""
    import queue

    chunk = 4 << 20
    w = torch.randn(1024, 1024, device=dev)
    chunks: queue.Queue[bytes] = queue.Queue(maxsize=2)
    stop = threading.Event()
    with tempfile.TemporaryFile(dir=os.environ.get("GPUWATCH_FAULT_DIR")) as f:
        f.write(os.urandom(chunk) * 16)
        f.flush()
        os.fsync(f.fileno())

        def read() -> None:
            n = 0
            while not stop.is_set():
                data = os.pread(f.fileno(), chunk, (n * chunk) % (16 * chunk))
                if hasattr(os, "posix_fadvise"):
                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                time.sleep(0.04)
                chunks.put(data)
                n += 1

        threading.Thread(target=read, daemon=True).start()
        loop = Loop(duration, on_ready)
        for _ in loop:
            data = chunks.get()
            x = torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(1024, 1024).to(dev)
            (x @ w).sum().item()
        stop.set()
    return loop.count


def off_cpu_checkpoint(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Every step writes and fsyncs a 16 MiB checkpoint to storage before the next batch."""
    w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    state = os.urandom(16 << 20)
    with tempfile.TemporaryFile(dir=os.environ.get("GPUWATCH_FAULT_DIR")) as f:
        loop = Loop(duration, on_ready)
        for _ in loop:
            (w @ w).sum().item()
            f.seek(0)
            f.write(state)
            f.flush()
            os.fsync(f.fileno())
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "h2d_small_batches": h2d_small_batches, "h2d_numpy": h2d_numpy,
    "d2h_results": d2h_results, "d2h_numpy": d2h_numpy, "d2h_many_small": d2h_many_small,
    "launch_small_matmuls": launch_small_matmuls, "launch_row_loop": launch_row_loop,
    "off_cpu_reader_thread": off_cpu_reader_thread, "off_cpu_checkpoint": off_cpu_checkpoint,
}
