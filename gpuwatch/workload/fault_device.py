"""Fault variants where the GPU process waits on the device's side: a few long kernels, or the CUDA allocator
called again and again. Neither is the launch path nor a busy GPU doing useful work.

- long kernels: one spin kernel of half a second per step with the host in ``synchronize``, a long kernel on
  a side stream that the main stream waits for while the host blocks in ``.item()``, or a CUDA graph of one
  long kernel that the host polls (sleeping between polls) instead of blocking.
- allocator: ``empty_cache()`` and fresh buffers of changing sizes every step, or the cache emptied between
  layers (each intermediate is a fresh cudaMalloc).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from gpuwatch.workload.fault_loop import Loop, Ready

# -- a few long kernels ------------------------------------------------------------------------------------

def _cycles_per_second(torch: Any) -> float:
    """The spin kernel's clock, measured: ``torch.cuda._sleep`` counts cycles, not seconds."""
    torch.cuda._sleep(1000)  # loads the kernel's module, which the timed launch must not include
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(100_000_000)
    end.record()
    end.synchronize()
    return 100_000_000 / (start.elapsed_time(end) / 1000.0)


def _spin(torch: Any, dev: Any, seconds: float, hz: float) -> None:
    """A single-thread kernel that runs ``seconds`` (on the CPU, where there is no GPU kernel, a sleep)."""
    if dev.type == "cuda":
        torch.cuda._sleep(int(seconds * hz))
    else:
        time.sleep(seconds)


def wait_for_long_kernel(torch: Any, dev: Any, w: Any, hz: float) -> None:
    """Half a second of one kernel (one block, one thread), then a synchronize: the host waits on the GPU."""
    _spin(torch, dev, 0.5, hz)
    w @ w
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)  # called here, not through a helper: this frame is where the host waits


def long_kernel_sync(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """One long kernel per step: GPU-Util near 100 %, SM activity near 0, the host in synchronize."""
    hz = _cycles_per_second(torch) if dev.type == "cuda" else 0.0
    w = torch.randn(256, 256, device=dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        wait_for_long_kernel(torch, dev, w, hz)
    return loop.count


def wait_on_side_stream(torch: Any, dev: Any, side: Any, w: Any, hz: float) -> float:
    """A long kernel on a side stream (a stuck exchange), the main stream waiting for it, the host in .item()."""
    if side is not None:
        with torch.cuda.stream(side):
            _spin(torch, dev, 0.8, hz)
        torch.cuda.current_stream(dev).wait_stream(side)
    else:
        _spin(torch, dev, 0.8, hz)
    return float((w @ w).sum().item())


def long_kernel_side_stream(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """The main stream waits on an event of a side stream whose kernel runs 0.8 s."""
    hz = _cycles_per_second(torch) if dev.type == "cuda" else 0.0
    side = torch.cuda.Stream(dev) if dev.type == "cuda" else None
    w = torch.randn(512, 512, device=dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        wait_on_side_stream(torch, dev, side, w, hz)
    return loop.count


def poll_until_done(torch: Any, dev: Any, graph: Any, done: Any, hz: float) -> int:
    """A captured step (one long kernel) replayed, then the host polls its event every millisecond."""
    polls = 0
    if graph is None:
        _spin(torch, dev, 0.6, hz)
        return polls
    graph.replay()
    done.record()
    while not done.query():
        time.sleep(0.001)
        polls += 1
    return polls


def long_kernel_graph_poll(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A CUDA graph whose one kernel runs 0.6 s, replayed every step; the host polls instead of blocking."""
    hz = _cycles_per_second(torch) if dev.type == "cuda" else 0.0
    graph = done = None
    if dev.type == "cuda":
        graph, done = torch.cuda.CUDAGraph(), torch.cuda.Event()
        with torch.cuda.graph(graph):  # captured on the graph's own stream
            _spin(torch, dev, 0.6, hz)
    loop = Loop(duration, on_ready)
    for _ in loop:
        poll_until_done(torch, dev, graph, done, hz)
    return loop.count


# -- the CUDA allocator ------------------------------------------------------------------------------------

def reallocate_buffers(torch: Any, dev: Any, sizes: list[int]) -> float:
    """The cache emptied, then fresh buffers of new sizes: every one a cudaMalloc, every free a cudaFree."""
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    buffers = []
    for n in sizes:  # a plain loop: the allocations stay in this function's frame
        buffers.append(torch.empty(n, device=dev))
    return float(buffers[0][:4096].fill_(1.0).sum().item())


def alloc_empty_cache(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Sixty-four buffers of 8 to 24 MiB (about 1 GiB, changing sizes) allocated after empty_cache every step."""
    rng = random.Random(0)
    loop = Loop(duration, on_ready)
    for _ in loop:
        reallocate_buffers(torch, dev, [rng.randrange(2 << 20, 6 << 20) for _ in range(64)])
    return loop.count


def forward_freeing_cache(torch: Any, dev: Any, layers: list[Any], x: Any) -> float:
    """Each layer's output is fresh memory because the cache is emptied after every layer."""
    for w in layers:
        x = torch.tanh(x @ w)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return float(x[0, 0].item())


def alloc_layerwise_free(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A 16-layer FP16 model run on batches of changing size, the cache emptied between layers."""
    dtype, rows = (torch.float16, (512, 4096)) if dev.type == "cuda" else (torch.float32, (64, 512))
    layers = [torch.randn(1024, 1024, device=dev, dtype=dtype) / 32 for _ in range(16)]
    rng = random.Random(0)
    loop = Loop(duration, on_ready)
    for _ in loop:
        forward_freeing_cache(torch, dev, layers, torch.randn(rng.randrange(*rows), 1024, device=dev, dtype=dtype))
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "long_kernel_sync": long_kernel_sync, "long_kernel_side_stream": long_kernel_side_stream,
    "long_kernel_graph_poll": long_kernel_graph_poll,
    "alloc_empty_cache": alloc_empty_cache, "alloc_layerwise_free": alloc_layerwise_free,
}
