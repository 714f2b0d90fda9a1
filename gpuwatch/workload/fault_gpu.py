"""Fault variants of a GPU that is busy but not doing its best: processes sharing it, the precision of the
math (FP32 without tensor cores) and DRAM bandwidth, and healthy look-alikes that must get no warning. They
mirror ``doctor/rules_gpu.py``.

``BODIES`` names every GPU-side variant: these, the feed's (``fault_feed``) and memory's (``fault_memory``).
Each class's variants differ in structure (how many processes, which dtype, which op), so a threshold
fitted to one cannot carry the others by accident.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from gpuwatch.workload import fault_feed, fault_memory
from gpuwatch.workload.fault_loop import Loop, Ready, sync

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
    **fault_feed.BODIES,
    "slicing_two_bursty": slicing_two_bursty, "slicing_unequal": slicing_unequal,
    **fault_memory.BODIES,
    "fp32_conv": fp32_conv, "fp32_bmm": fp32_bmm, "dram_softmax": dram_softmax, "dram_fp16_axpy": dram_fp16_axpy,
    "healthy_fp16_mlp": healthy_fp16_mlp, "healthy_tf32": healthy_tf32, "pinned_overlap": pinned_overlap,
}
