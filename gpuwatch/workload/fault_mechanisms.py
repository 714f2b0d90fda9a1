"""Fault variants of mechanisms no finding class was written for, where the GPU process's own feeding thread
spends its time on the CPU: compiling, serializing results, or in a torch or numpy op on CPU tensors. The
doctor must say where the time goes from the evidence (stacks), not from a rule fitted to these programs.

- compile: ``torch.compile`` with static shapes and a batch size that never repeats (every step compiles), or a
  pipeline assembled and compiled per request.
- serialization: the whole session state pickled every step, or each step's response encoded as JSON.
- host_op: the features computed by a CPU matmul, or a numpy FFT, before a little GPU work.

``BODIES`` names every mechanism variant: these; the device's (``fault_device``: long kernels, the allocator);
the feeders' (``fault_feeders``: children, peers); and ``fault_waits`` (a lock another thread holds, a
subprocess per batch). Each variant's function named in the catalogue (``function``) does the injected work,
so the evidence's code locations can be checked against it.
"""

from __future__ import annotations

import json
import pickle
import random
from collections.abc import Callable
from typing import Any

from gpuwatch.workload import fault_device, fault_feeders, fault_waits
from gpuwatch.workload.fault_loop import Loop, Ready

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
    "serialize_pickle_state": serialize_pickle_state, "serialize_json_responses": serialize_json_responses,
    "host_op_matmul": host_op_matmul, "host_op_fft": host_op_fft,
    **fault_device.BODIES, **fault_feeders.BODIES, **fault_waits.BODIES,
}
