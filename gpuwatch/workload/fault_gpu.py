"""Fault variants on the GPU side: copies in each direction, launches, processes sharing a GPU, memory
shapes, the precision of the math, and healthy look-alikes that must get no warning.

Each class's variants differ in structure (direction, size, source of the data, how many processes, which
dtype), so a threshold fitted to one cannot carry the others by accident.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from gpuwatch.workload.fault_loop import Loop, Ready, free_bytes, sync

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


# -- processes sharing one GPU ---------------------------------------------------------------------------

def _children(kinds: list[str], duration: float) -> list[subprocess.Popen[str]]:
    argv = [sys.executable, "-m", "gpuwatch.workload.faults", "--child"]
    children = [subprocess.Popen([*argv, kind, f"{duration + 5:g}"], stderr=subprocess.PIPE, text=True)
                for kind in kinds]
    for c in children:  # each child's first line says it is warm
        assert c.stderr is not None
        c.stderr.readline()
    return children


def slicing(kinds: list[str], duration: float, on_ready: Ready) -> int:
    with ExitStack() as stack:
        for c in _children(kinds, duration):
            stack.callback(c.kill)
        loop = Loop(duration, on_ready)
        for _ in loop:
            time.sleep(0.5)
        return loop.count


def slicing_two_bursty(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Two processes, each running bursts of BF16 GEMMs with short pauses: neither fills the GPU alone."""
    return slicing(["bursts", "bursts"], duration, on_ready)


def slicing_unequal(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A large FP16 job beside a small bursty one on the same GPU."""
    return slicing(["gemm_fp16", "bursts"], duration, on_ready)


def child_body(kind: str) -> Callable[[Any, Any, float, Ready], int]:
    """What a child process of a shared-GPU fault runs."""
    def gemm(torch: Any, dev: Any, duration: float, on_ready: Ready, dtype: Any = None, pause: float = 0.0,
             size: int = 8192) -> int:
        a = torch.randn(size, size, device=dev, dtype=dtype or torch.bfloat16)
        b = torch.randn(size, size, device=dev, dtype=dtype or torch.bfloat16)
        loop = Loop(duration, on_ready)
        for _ in loop:
            for _ in range(8):
                a = torch.nn.functional.normalize(a @ b, dim=1)
            sync(torch, dev)
            if pause:
                time.sleep(pause)
        return loop.count

    bodies: dict[str, Callable[[Any, Any, float, Ready], int]] = {
        "gemm": gemm,
        "gemm_fp16": lambda t, d, s, r: gemm(t, d, s, r, dtype=t.float16),
        "bursts": lambda t, d, s, r: gemm(t, d, s, r, pause=0.02, size=6144),
    }
    return bodies[kind]


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


# -- the math ----------------------------------------------------------------------------------------------

def fp32_conv(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """FP32 convolutions with TF32 off (cuDNN), as an image model run without autocast."""
    torch.backends.cudnn.allow_tf32 = False
    conv = torch.nn.Conv2d(256, 256, 3, padding=1).to(dev)
    x = torch.randn(64, 256, 64, 64, device=dev)
    loop = Loop(duration, on_ready)
    with torch.no_grad():
        for _ in loop:
            for _ in range(4):
                conv(x)
            sync(torch, dev)
    return loop.count


def fp32_bmm(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Batched FP32 matmuls (attention-shaped) with TF32 off."""
    torch.backends.cuda.matmul.allow_tf32 = False
    q = torch.randn(64, 2048, 2048, device=dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        for _ in range(2):
            torch.bmm(q, q)
        sync(torch, dev)
    return loop.count


def dram_softmax(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Softmax over a 2 GiB FP32 tensor, again and again: each pass reads and writes it all."""
    x = torch.randn(16384, 32768, device=dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        for _ in range(4):
            x = torch.softmax(x, dim=1)
        sync(torch, dev)
    return loop.count


def dram_fp16_axpy(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """FP16 axpy passes over 4 GiB (elementwise, no reuse)."""
    x = torch.randn(1 << 31, device=dev, dtype=torch.float16)
    y = torch.randn(1 << 31, device=dev, dtype=torch.float16)
    loop = Loop(duration, on_ready)
    for _ in loop:
        for _ in range(8):
            y.add_(x, alpha=0.5)
        sync(torch, dev)
    return loop.count


def healthy_fp16_mlp(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A large FP16 MLP forward pass, batch 8192: tensor cores busy."""
    layers = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(4)]).to(dev).half()
    x = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
    loop = Loop(duration, on_ready)
    with torch.no_grad():
        for _ in loop:
            layers(x)
            sync(torch, dev)
    return loop.count


def fp32_square_matmuls(torch: Any, dev: Any, duration: float, on_ready: Ready, tf32: bool) -> int:
    """8192x8192 FP32 matmuls, four per step, with TF32 on (tensor cores) or off (the FP32 pipe)."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(8192, 8192, device=dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        for _ in range(4):
            a = (a @ a).clamp_(-1, 1)
        sync(torch, dev)
    return loop.count


def healthy_tf32(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Look-alike: FP32 tensors with TF32 matmuls on, so the tensor cores do the work."""
    return fp32_square_matmuls(torch, dev, duration, on_ready, tf32=True)


def pinned_overlap(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Look-alike: pinned host batches copied with non_blocking on a side stream, overlapped with heavy BF16
    compute: PCIe busy, the GPU saturated, nothing to fix."""
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    host = torch.randn(32 << 20).pin_memory()
    target = torch.empty(32 << 20, device=dev)
    side = torch.cuda.Stream(dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        with torch.cuda.stream(side):
            target.copy_(host, non_blocking=True)
        for _ in range(6):
            a = torch.nn.functional.normalize(a @ b, dim=1)
        torch.cuda.current_stream(dev).wait_stream(side)
        sync(torch, dev)
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "h2d_small_batches": h2d_small_batches, "h2d_numpy": h2d_numpy,
    "d2h_results": d2h_results, "d2h_numpy": d2h_numpy, "d2h_many_small": d2h_many_small,
    "launch_small_matmuls": launch_small_matmuls, "launch_row_loop": launch_row_loop,
    "off_cpu_reader_thread": off_cpu_reader_thread, "off_cpu_checkpoint": off_cpu_checkpoint,
    "slicing_two_bursty": slicing_two_bursty, "slicing_unequal": slicing_unequal,
    "leak_slow": leak_slow, "leak_small_tensors": leak_small_tensors,
    "churn_fast": churn_fast, "churn_shapes": churn_shapes, "idle_event": idle_event, "idle_small": idle_small,
    "fp32_conv": fp32_conv, "fp32_bmm": fp32_bmm, "dram_softmax": dram_softmax, "dram_fp16_axpy": dram_fp16_axpy,
    "healthy_fp16_mlp": healthy_fp16_mlp, "healthy_tf32": healthy_tf32, "pinned_overlap": pinned_overlap,
}
