"""Injected faults: small, self-contained programs that each hold a GPU back in one known way.

``gpuwatch workload --fault CLASS`` runs one; ``gpuwatch validate --doctor`` runs them all under the sampler
and checks that the doctor names each one. Each fault is the smallest loop that shows its class the way a
real service does (nothing is downloaded; sizes scale with the GPU's memory), so the doctor is judged on
real signals rather than on numbers written to match it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from gpuwatch.workload import fault_gpu, fault_hidden, fault_limits, fault_mechanisms, fault_threads
from gpuwatch.workload.fault_loop import Loop, Ready, free_bytes, sync
from gpuwatch.workload.faults_catalogue import FAULTS
from gpuwatch.workload.run import WorkloadError, _import_torch


def run_fault(name: str, duration: float, on_ready: Ready, device: str = "cuda") -> dict[str, Any]:
    """Run fault ``name`` for ``duration`` seconds after its warm-up; returns what it did."""
    if name not in FAULTS:
        raise WorkloadError(f"unknown fault {name!r}; choose from {', '.join(FAULTS)}")
    torch = _import_torch()
    if device == "cuda" and not torch.cuda.is_available():
        raise WorkloadError("no CUDA device: faults reproduce GPU bottlenecks, run them on a GPU machine")
    dev = torch.device(device)
    start = time.monotonic()
    loops = BODIES[name](torch, dev, duration, on_ready)
    return {"fault": name, "expected": FAULTS[name].expected, "pid": os.getpid(), "loops": loops,
            "seconds": round(time.monotonic() - start, 2)}


def python_preprocess(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    text = "the quick brown fox jumps over the lazy dog " * 400
    loop = Loop(duration, on_ready)
    for _ in loop:
        ids = [hash(tok) % 4096 for tok in text.split() for _ in range(8)]  # tokenising in Python
        x = torch.tensor(ids[:64 * 64], device=dev, dtype=torch.bfloat16).reshape(64, 64).repeat(1, 64)
        (x @ w).sum().item()
    return loop.count


def launch_bound(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    x = torch.zeros(256, device=dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        for _ in range(200):
            x.add_(1.0).mul_(0.5)
        sync(torch, dev)
    return loop.count


def pageable_h2d(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    host = torch.randn(64 << 20)  # 256 MiB of pageable memory: every copy is staged by the CPU
    target = torch.empty_like(host, device=dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        target.copy_(host)
        target.mul_(2.0).sum().item()
    return loop.count


def off_cpu_wait(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Reads 4 MiB chunks from a file whose pages are dropped after each read, with a storage latency."""
    chunk = 4 << 20
    w = torch.randn(1024, 1024, device=dev)
    with tempfile.TemporaryFile(dir=os.environ.get("GPUWATCH_FAULT_DIR")) as f:
        f.write(os.urandom(chunk) * 16)
        f.flush()
        os.fsync(f.fileno())
        fd, size = f.fileno(), 16 * chunk
        loop = Loop(duration, on_ready)
        for n in loop:
            offset = (n * chunk) % size
            data = os.pread(fd, chunk, offset)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            time.sleep(0.03)  # network storage: tens of milliseconds per read
            x = torch.frombuffer(bytearray(data[:1024 * 1024 * 4]), dtype=torch.float32).reshape(1024, 1024)
            (x.to(dev) @ w).sum().item()
    return loop.count


class _HeavyItems:
    """A dataset whose items cost tens of milliseconds of Python each (decoding, augmenting), returned as
    tensors so collating stays cheap: the workers, not the main process, are the limit."""

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, i: int) -> Any:
        import torch

        acc = [0.0] * 256
        for k in range(150_000):
            acc[k & 255] += (k * i) % 7
        return torch.tensor(acc)


def _loader_loop(torch: Any, dev: Any, duration: float, on_ready: Ready, workers: int, batch: int,
                 dtype: Any, width: int) -> int:
    """The GPU loop fed by a DataLoader of ``workers`` spawned processes over :class:`_HeavyItems`: each
    batch times a (256, ``width``) matrix, a few microseconds of GPU work."""
    from torch.utils.data import DataLoader

    w = torch.randn(256, width, device=dev, dtype=dtype)
    dataset: Any = _HeavyItems()
    loader: Any = DataLoader(dataset, batch_size=batch, num_workers=workers, multiprocessing_context="spawn")
    batches = iter(loader)
    next(batches)
    loop = Loop(duration, on_ready)
    try:
        for _ in loop:
            (next(batches).to(dev, dtype) @ w).sum().item()
    finally:
        batches._shutdown_workers()
    return loop.count


def dataloader_workers(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Two DataLoader workers, batch 4, BF16 compute."""
    return _loader_loop(torch, dev, duration, on_ready, 2, 4, torch.bfloat16, 4096)


def dataloader_four(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Four DataLoader workers, batch 8, FP32 compute."""
    return _loader_loop(torch, dev, duration, on_ready, 4, 8, torch.float32, 256)


def process_pool(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A multiprocessing pool of three (not a DataLoader) decodes items for the GPU loop."""
    import multiprocessing as mp

    from gpuwatch.workload.fault_threads import _heavy_item

    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    with mp.get_context("spawn").Pool(3) as pool:
        items = pool.imap(_heavy_item, range(1 << 30), chunksize=1)
        next(items)
        loop = Loop(duration, on_ready)
        for _ in loop:
            ids = [next(items) for _ in range(2)]
            (torch.tensor(ids * 2048, device=dev, dtype=torch.bfloat16).reshape(1, 4096) @ w).sum().item()
        pool.terminate()
    return loop.count


def memory_leak(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """1 GiB/s kept in a list (a cache keyed by request, never evicted), stopping short of the limit."""
    kept: list[Any] = []
    step = 128 << 20
    budget = int(0.6 * free_bytes(torch, dev))
    loop = Loop(duration, on_ready)
    for _ in loop:
        if (len(kept) + 1) * step < budget:
            kept.append(torch.ones(step // 4, device=dev))
        time.sleep(0.125)
    return loop.count


def memory_churn(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Every 4 s a large batch needs a third of free memory for 1.5 s, then the cache is emptied."""
    size = int(free_bytes(torch, dev) / 3)
    w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    loop = Loop(duration, on_ready)
    for n in loop:
        phase = n % 40  # 0.1 s steps
        if phase == 0:
            big = torch.empty(size // 2, dtype=torch.float16, device=dev).fill_(1.0)
        elif phase == 15:
            del big
            torch.cuda.empty_cache() if dev.type == "cuda" else None
        (w @ w).sum().item()
        time.sleep(0.1)
    return loop.count


def fp32_matmul(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    return fault_gpu.fp32_square_matmuls(torch, dev, duration, on_ready, tf32=False)


def dram_bound(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    x = torch.randn(512 << 20, device=dev)  # 2 GiB: far beyond any cache
    y = torch.empty_like(x)
    loop = Loop(duration, on_ready)
    for _ in loop:
        for _ in range(10):
            y.copy_(x)
            x.add_(y, alpha=0.5)
        sync(torch, dev)
    return loop.count


def idle_memory(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    held = torch.ones(int(free_bytes(torch, dev) / 5) // 4, device=dev)  # noqa: F841 - held on purpose
    loop = Loop(duration, on_ready)
    for _ in loop:
        time.sleep(0.5)
    return loop.count


def healthy(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Large BF16 matmuls (the shared-GPU children's loop, alone): tensor cores busy, nothing to fix."""
    return fault_gpu.child_body("gemm")(torch, dev, duration, on_ready)


def time_slicing(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Three processes, each running the healthy GEMM loop, share the GPU by time-slicing."""
    return fault_gpu.slicing(["gemm", "gemm", "gemm"], duration, on_ready)


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "python_preprocess": python_preprocess, "launch_bound": launch_bound, "pageable_h2d": pageable_h2d,
    "off_cpu_wait": off_cpu_wait, "dataloader_workers": dataloader_workers, "memory_leak": memory_leak,
    "memory_churn": memory_churn, "fp32_matmul": fp32_matmul, "dram_bound": dram_bound,
    "idle_memory": idle_memory, "time_slicing": time_slicing, "healthy": healthy,
    "dataloader_four": dataloader_four, "process_pool": process_pool,
    **fault_threads.BODIES, **fault_gpu.BODIES, **fault_mechanisms.BODIES, **fault_hidden.BODIES,
    **fault_limits.BODIES,
}


def _child_main(kind: str, duration: float) -> None:
    torch = _import_torch()
    fault_gpu.child_body(kind)(torch, torch.device("cuda"), duration,
                               lambda: print("warm", file=sys.stderr, flush=True))


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    _child_main(sys.argv[2], float(sys.argv[3]))
