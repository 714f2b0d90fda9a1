"""Fault variants whose mechanism no single finding class was written for: the GPU process's own thread spends
its time compiling, waiting on a few long kernels, in the CUDA allocator, serializing results or in a torch or
numpy op on the CPU. The doctor must say where the time goes from the evidence (stacks), not from a rule
fitted to these programs.

- compile: ``torch.compile`` with static shapes and a batch size that never repeats (every step compiles), or a
  pipeline assembled and compiled per request.
- long kernels: one spin kernel of half a second per step with the host in ``synchronize``, a long kernel on
  a side stream that the main stream waits for while the host blocks in ``.item()``, or a CUDA graph of one
  long kernel that the host polls (sleeping between polls) instead of blocking.
- allocator: ``empty_cache()`` and fresh buffers of changing sizes every step, or the cache emptied between
  layers (each intermediate is a fresh cudaMalloc).
- serialization: the whole session state pickled every step, or each step's response encoded as JSON.
- host_op: the features computed by a CPU matmul, or a numpy FFT, before a little GPU work.

The processes that feed a GPU process (children, peers, locks, a subprocess per batch) are in
``fault_feeders``. Each variant's function named in the catalogue (``function``) is the one doing the
injected work, so the evidence's code locations can be checked against it.
"""

from __future__ import annotations

import json
import pickle
import random
import time
from collections.abc import Callable
from typing import Any

from gpuwatch.workload import fault_feeders
from gpuwatch.workload.fault_loop import Loop, Ready, sync

# -- compile -----------------------------------------------------------------------------------------------

def _allow_recompiles(torch: Any) -> None:
    """Past dynamo's recompile limit it falls back to eager; a service that recompiles for ever does not stop."""
    import torch._dynamo.config as dynamo_config

    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(dynamo_config, name):
            setattr(dynamo_config, name, 1 << 20)


def recompile_step(torch: Any, model: Any, dev: Any, rows: int) -> float:
    """One step on a batch of ``rows`` rows: a shape the compiled model has not seen, so dynamo compiles."""
    x = torch.randn(rows, 512, device=dev)
    return float(model(x).sum().item())


def compile_shapes(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A compiled MLP with ``dynamic=False`` fed batches whose size never repeats: every step recompiles."""
    _allow_recompiles(torch)
    mlp = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512)).to(dev)
    model = torch.compile(mlp, dynamic=False)
    with torch.no_grad():
        recompile_step(torch, model, dev, 7)
        loop = Loop(duration, on_ready)
        for n in loop:
            recompile_step(torch, model, dev, 8 + n)
    return loop.count


def _relu(x: Any) -> Any:
    return x.relu()


def _gate(x: Any) -> Any:
    return x.sigmoid() * x


def _affine(x: Any) -> Any:
    return x * 0.5 + 1.0


def _tanh(x: Any) -> Any:
    return x.tanh()


def _sine(x: Any) -> Any:
    return x.sin()


def _root(x: Any) -> Any:
    return x.abs().sqrt()


REQUEST_OPS = (_relu, _gate, _affine, _tanh, _sine, _root)


def compile_request(torch: Any, ops: tuple[Callable[[Any], Any], ...], x: Any) -> float:
    """A request's pipeline (its own sequence of ops) compiled and run: a new graph for every request."""
    def pipeline(x: Any) -> Any:
        for op in ops:
            x = op(x)
        return x.sum()

    return float(torch.compile(pipeline)(x).item())


def compile_per_request(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each request chooses ten post-processing ops; the server compiles the pipeline it asked for."""
    _allow_recompiles(torch)
    rng = random.Random(0)
    x = torch.randn(1024, 1024, device=dev)
    compile_request(torch, (_relu,), x)
    loop = Loop(duration, on_ready)
    for _ in loop:
        compile_request(torch, tuple(rng.choice(REQUEST_OPS) for _ in range(10)), x)
    return loop.count


# -- a few long kernels ------------------------------------------------------------------------------------

def _cycles_per_second(torch: Any) -> float:
    """The spin kernel's clock, measured: ``torch.cuda._sleep`` counts cycles, not seconds."""
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
    sync(torch, dev)


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


# -- serialization -----------------------------------------------------------------------------------------

def snapshot_state(state: dict[str, Any]) -> int:
    """The whole session state pickled (as a hand-off to another process would): Python objects, no arrays."""
    return len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


def serialize_pickle_state(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Per-session records (200 000 small dicts) updated from each step's scores and pickled every step."""
    state = {f"session-{i}": {"tokens": list(range(i % 16)), "score": 0.0, "turns": i % 7} for i in range(200_000)}
    keys = list(state)
    w = torch.randn(1024, 1024, device=dev)
    loop = Loop(duration, on_ready)
    for n in loop:
        score = float((w @ w).sum().item())
        state[keys[n % len(keys)]]["score"] = score
        snapshot_state(state)
    return loop.count


def encode_response(scores: list[float], catalogue: list[dict[str, Any]]) -> int:
    """The response: every candidate with its metadata and score, as JSON text."""
    for item, score in zip(catalogue, scores, strict=True):
        item["score"] = score
    return len(json.dumps({"results": catalogue, "count": len(catalogue)}))


def serialize_json_responses(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each step scores 40 000 candidates on the GPU (BF16) and returns them all, encoded as JSON."""
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    catalogue = [{"id": i, "title": f"item {i}", "tags": ["a", "b", str(i % 97)]} for i in range(40_000)]
    emb = torch.randn(40_000, 256, device=dev, dtype=dtype)
    q = torch.randn(256, device=dev, dtype=dtype)
    loop = Loop(duration, on_ready)
    for _ in loop:
        encode_response((emb @ q).float().cpu().tolist(), catalogue)
    return loop.count


# -- a torch or numpy op on the CPU ------------------------------------------------------------------------

def featurize_on_cpu(torch: Any, raw: Any, proj: Any) -> Any:
    """Preprocessing on CPU tensors: a projection and a normalisation (native code, the GIL released)."""
    feats = torch.relu(raw @ proj)
    return feats / (feats.norm(dim=1, keepdim=True) + 1e-6)


def host_op_matmul(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each batch's features are a CPU matmul (4096x2048 by 2048x2048, FP32) before a small GPU matmul."""
    raw, proj = torch.randn(4096, 2048), torch.randn(2048, 2048)
    w = torch.randn(2048, 256, device=dev)
    loop = Loop(duration, on_ready)
    for _ in loop:
        (featurize_on_cpu(torch, raw, proj).to(dev) @ w).sum().item()
    return loop.count


def spectrogram(np: Any, signals: Any) -> Any:
    """Magnitude spectra of 256-sample frames, in numpy (pocketfft) on the CPU."""
    frames = signals.reshape(signals.shape[0], -1, 256)
    return np.abs(np.fft.rfft(frames * np.hanning(256), axis=-1)).astype(np.float32)


def host_op_fft(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Audio batches (64 clips of 4 s at 16 kHz) turned into spectrograms with numpy, then a GPU layer (FP16)."""
    import numpy as np

    signals = np.random.default_rng(0).standard_normal((64, 65536)).astype(np.float32)
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    w = torch.randn(129, 128, device=dev, dtype=dtype)
    loop = Loop(duration, on_ready)
    for _ in loop:
        (torch.from_numpy(spectrogram(np, signals)).to(dev, dtype) @ w).sum().item()
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "compile_shapes": compile_shapes, "compile_per_request": compile_per_request,
    "long_kernel_sync": long_kernel_sync, "long_kernel_side_stream": long_kernel_side_stream,
    "long_kernel_graph_poll": long_kernel_graph_poll,
    "alloc_empty_cache": alloc_empty_cache, "alloc_layerwise_free": alloc_layerwise_free,
    "serialize_pickle_state": serialize_pickle_state, "serialize_json_responses": serialize_json_responses,
    "host_op_matmul": host_op_matmul, "host_op_fft": host_op_fft,
    **fault_feeders.BODIES,
}
