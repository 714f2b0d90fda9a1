"""How a padded batch reaches the model and comes back: eagerly, through CUDA graphs, or torch.compile.

Every engine takes a pinned host batch, enqueues the host-to-device copy without waiting
(``non_blocking``), runs the model and enqueues the copy of the logits back into pinned host memory,
then returns an event to poll: the CPU goes on forming the next batch while the GPU works.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import torch

from gpuwatch.workload.model import Encoder
from gpuwatch.workload.text import PAD

log = logging.getLogger(__name__)



class Ready:
    """The completion of work that already finished (CPU): same interface as ``torch.cuda.Event``."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None


Completion = Any  # torch.cuda.Event or Ready


class EagerEngine:
    """The model called op by op: one kernel launch per op, from Python."""

    name = "eager"

    def __init__(self, model: Callable[..., torch.Tensor], device: torch.device) -> None:
        self.model = model
        self.device = device

    def submit(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, Completion]:
        with torch.inference_mode():
            d_ids = ids.to(self.device, non_blocking=True)
            d_len = lengths.to(self.device, non_blocking=True)
            out = self.model(d_ids, d_len)
            return _to_host(out, self.device)


def _to_host(out: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, Completion]:
    if device.type != "cuda":
        return out, Ready()
    host = torch.empty(out.shape, dtype=out.dtype, pin_memory=True)
    host.copy_(out, non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    return host, event


def graph_sizes(cap: int) -> list[int]:
    """Batch sizes to capture for one bucket: 1, 2, 4, then every multiple of 8 up to 64, then every multiple
    of 32, and the cap. An idle GPU's batch is padded up to the next size (at most 7 wasted rows up to 64);
    a batch formed while the GPU is busy is cut down to one, so at full load nothing is padded."""
    steps = [1, 2, 4, *range(8, 65, 8), *range(96, cap, 32)]
    return sorted({s for s in steps if s < cap} | {cap})


Capture = Callable[[Callable[[], torch.Tensor], Any], tuple[Callable[[], Any], torch.Tensor]]


def cuda_graph(fn: Callable[[], torch.Tensor], pool: Any) -> tuple[Callable[[], Any], torch.Tensor]:
    """``fn()`` captured as a CUDA graph: (replay, its static output). One eager run on a side stream first,
    so lazy cuBLAS/attention initialisation is not captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = fn()
    return graph.replay, out  # the bound method keeps the graph alive


class GraphEngine:
    """One CUDA graph per (bucket, batch size): a whole forward pass is one launch. Batches are padded up
    to the next captured size; the graphs share one memory pool (they never run at the same time)."""

    name = "cuda-graphs"

    def __init__(self, model: Callable[..., torch.Tensor], device: torch.device, caps: dict[int, int],
                 capture: Capture = cuda_graph) -> None:
        self.device = device
        self.graphs: dict[tuple[int, int], tuple[Callable[[], Any], torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self.sizes = {bucket: graph_sizes(cap) for bucket, cap in caps.items()}
        pool = torch.cuda.graph_pool_handle() if device.type == "cuda" else None
        with torch.inference_mode():
            for bucket in sorted(caps, reverse=True):  # largest first, so later captures reuse its memory
                for size in sorted(self.sizes[bucket], reverse=True):
                    ids = torch.full((size, bucket), PAD, dtype=torch.int32, device=device)
                    lengths = torch.ones(size, dtype=torch.int32, device=device)
                    replay, out = capture(functools.partial(model, ids, lengths), pool)
                    self.graphs[(bucket, size)] = (replay, ids, lengths, out)
            for replay, *_ in self.graphs.values():  # warm-up: each graph's first replay is slower
                replay()
        if device.type == "cuda":
            torch.cuda.synchronize()

    def submit(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, Completion]:
        n, bucket = ids.shape
        size = next(s for s in self.sizes[bucket] if s >= n)
        replay, s_ids, s_len, s_out = self.graphs[(bucket, size)]
        with torch.inference_mode():  # the static buffers are inference tensors: update them in that mode
            # Rows past n keep the previous batch's (valid) data: computed, then ignored.
            s_ids[:n].copy_(ids, non_blocking=True)
            s_len[:n].copy_(lengths, non_blocking=True)
            replay()
            return _to_host(s_out[:n], self.device)


def make_engine(compiler: str, model: Encoder, device: torch.device,
                caps: dict[int, int]) -> tuple[EagerEngine | GraphEngine, dict[str, Any]]:
    """The engine ``compiler`` asks for, falling back to eager (with the reason in the notes) when it fails."""
    if compiler == "auto":
        compiler = "graphs" if device.type == "cuda" else "none"
    notes: dict[str, Any] = {"compiler_requested": compiler}
    try:
        if compiler == "graphs":
            if device.type != "cuda":
                raise RuntimeError("CUDA graphs need a CUDA device")
            graphs = GraphEngine(model, device, caps)
            notes["graphs"] = len(graphs.graphs)
            engine: EagerEngine | GraphEngine = graphs
        elif compiler == "inductor":
            compiled = torch.compile(model, dynamic=True)
            engine = EagerEngine(compiled, device)
            for bucket in caps:  # compile now, not inside the measured window
                ids = torch.zeros((2, bucket), dtype=torch.int32)
                engine.submit(ids, torch.ones(2, dtype=torch.int32))
        else:
            engine = EagerEngine(model, device)
    except Exception as exc:  # a compiler that fails must not lose the run: say so and run eagerly
        log.warning("%s failed (%s: %s); running eagerly", compiler, type(exc).__name__, exc)
        notes["compiler_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        engine = EagerEngine(model, device)
    notes["compiler"] = engine.name if not (compiler == "inductor" and "compiler_error" not in notes) \
        else "torch.compile"
    return engine, notes
