"""Fault variants of host-side mechanisms no variant exercised before: the interpreter's garbage collector,
Python data turned into tensors, page-locking host memory per batch, and a memory-mapped file whose pages
fault in from storage (no read() call to see). The feeding thread's own code does the injected work; the
function each catalogue entry names (``function``) is where it happens.

- python (the garbage collector): ``gc.collect()`` after every batch beside a large live cache, or request
  trees with reference cycles that survive a few requests, so the collector's full passes run by themselves.
- host_op (Python data to a tensor): ``torch.tensor`` of a nested list of floats, or of a list of numpy rows.
- allocator (host memory page-locked per batch): a staging buffer registered with ``cudaHostRegister`` and
  unregistered every batch, or a checkpoint staged into freshly pinned buffers every step. Without CUDA the
  buffers are not registered (the loop still runs).
- storage (page faults, not reads): rows gathered from a memory-mapped embedding table, or column slices of
  memory-mapped weights, after the kernel dropped the pages (memory pressure, simulated with madvise and
  posix_fadvise). On a file system held in memory (tmpfs) nothing is dropped: set ``GPUWATCH_FAULT_DIR``.

The peers' variants (a network service, a log collector, a gloo collective) are in ``fault_hidden_peers``; a
busy poll on an event and a one-thread pool waited on are in ``fault_hidden_waits``.
"""

from __future__ import annotations

import gc
import mmap
import os
import random
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gpuwatch.workload import fault_hidden_peers, fault_hidden_waits
from gpuwatch.workload.fault_loop import Loop, Ready

# -- the garbage collector ---------------------------------------------------------------------------------

def _session_cache(n: int) -> dict[int, dict[str, Any]]:
    """A service's live state: ``n`` request records of small containers, every one tracked by the collector."""
    return {i: {"id": i, "tokens": [i, i + 1, i + 2], "meta": (str(i), i % 7)} for i in range(n)}


def release_batch() -> int:
    """Frees the batch's objects 'early' with a full collection, which walks every live object, cache and all."""
    return gc.collect()


def gc_collect_per_batch(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A 600 000-record session cache held in memory; after each small GPU batch the loop calls gc.collect()."""
    cache = _session_cache(600_000)
    w = torch.randn(1024, 1024, device=dev)
    x = torch.randn(256, 1024, device=dev)
    loop = Loop(duration, on_ready)
    for n in loop:
        (x @ w).sum().item()
        cache[n % len(cache)]["tokens"].append(n)
        release_batch()
    return loop.count


class _Node:
    __slots__ = ("children", "parent", "value")

    def __init__(self, parent: _Node | None, value: int) -> None:
        self.children: list[_Node] = []
        self.parent, self.value = parent, value  # parent <-> child: a reference cycle


def build_request_tree(size: int, seed: int) -> tuple[_Node, list[float]]:
    """A request parsed into a tree whose nodes point at their parents (cycles only the collector frees); the
    allocations here are what trigger its collections, full ones included."""
    root = _Node(None, seed)
    nodes = [root]
    for k in range(1, size):
        parent = nodes[(k * 7919 + seed) % len(nodes)]
        node = _Node(parent, k)
        parent.children.append(node)
        nodes.append(node)
    return root, [float(len(nodes[i].children)) for i in range(256)]


def gc_gen2_churn(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each request builds a 40 000-node tree with parent links and keeps the last eight (a retry window) beside
    a 500 000-record cache: the trees reach the oldest generation, then die there as cycles, and the automatic
    full collections that free them walk the whole cache."""
    cache = _session_cache(500_000)  # noqa: F841 - the live state every full collection walks
    recent: deque[_Node] = deque(maxlen=8)
    w = torch.randn(256, 256, device=dev)
    loop = Loop(duration, on_ready)
    for n in loop:
        tree, values = build_request_tree(40_000, n)
        recent.append(tree)
        x = torch.tensor(values, device=dev)
        (x @ w).sum().item()
    return loop.count


# -- Python data turned into tensors -----------------------------------------------------------------------

def collate_rows(torch: Any, rows: list[list[float]]) -> Any:
    """The batch as parsed (a list of rows of Python floats) turned into a tensor element by element."""
    return torch.tensor(rows)


def tensor_from_nested_list(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each batch is 512 records of 2048 Python floats (as a JSON decoder leaves them) made into a tensor."""
    rng = random.Random(0)
    records = [[rng.random() for _ in range(2048)] for _ in range(512)]
    w = torch.randn(2048, 512, device=dev)
    loop = Loop(duration, on_ready)
    for n in loop:
        records[n % 512][0] = float(n)
        (collate_rows(torch, records).to(dev) @ w).sum().item()
    return loop.count


def stack_features(torch: Any, features: list[Any]) -> Any:
    """A list of numpy feature rows passed to torch.tensor, which walks each row as a Python sequence."""
    return torch.tensor(features)


def tensor_from_ndarray_list(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Each batch is 256 numpy rows of 4096 float32 features (one per item, from a feature extractor),
    turned into a tensor with torch.tensor(list) instead of np.stack, then a BF16 GPU layer."""
    import warnings

    import numpy as np

    rng = np.random.default_rng(0)
    features = [rng.standard_normal(4096).astype(np.float32) for _ in range(256)]
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    w = torch.randn(4096, 1024, device=dev, dtype=dtype)
    warnings.filterwarnings("ignore", message="Creating a tensor from a list of numpy.ndarrays")
    loop = Loop(duration, on_ready)
    for _ in loop:
        (stack_features(torch, features).to(dev, dtype) @ w).sum().item()
    return loop.count


# -- host memory page-locked per batch ---------------------------------------------------------------------

def register_staging(torch: Any, buf: Any) -> None:
    """Page-locks the staging buffer for a fast copy (cudaHostRegister): the kernel pins every page, again
    each batch because the buffer is unregistered after it."""
    if buf.device.type == "cpu" and torch.cuda.is_available():
        err = int(torch.cuda.cudart().cudaHostRegister(buf.data_ptr(), buf.numel() * buf.element_size(), 0))
        if err:
            raise RuntimeError(f"cudaHostRegister failed: cudaError {err}")


def _unregister(torch: Any, buf: Any) -> None:
    if torch.cuda.is_available():
        torch.cuda.cudart().cudaHostUnregister(buf.data_ptr())


def pin_register_per_batch(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A 256 MiB staging buffer registered before each batch's copy and unregistered after it."""
    staging = torch.empty(64 << 20).fill_(1.0)
    target = torch.empty(64 << 20, device=dev)
    loop = Loop(duration, on_ready)
    for n in loop:
        staging[n % staging.numel()] = float(n)
        register_staging(torch, staging)
        target.copy_(staging, non_blocking=True)
        target[:1 << 20].sum().item()
        _unregister(torch, staging)
    return loop.count


def stage_state_dict(torch: Any, state: dict[str, Any]) -> dict[str, Any]:
    """Stages a checkpoint: fresh CPU buffers, each page-locked (as a state-dict stager does), then copied to."""
    staged = {}
    for name, t in state.items():
        host = torch.empty(t.shape, dtype=t.dtype)
        register_staging(torch, host)
        staged[name] = host.copy_(t, non_blocking=True)
    return staged


def pin_checkpoint_staging(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Every training step stages its 192 MiB of weights for an asynchronous checkpoint into new pinned
    buffers (BF16 compute); the buffers are unregistered once the copy is done."""
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    state = {f"layer{i}.weight": torch.randn(4096, 4096, device=dev, dtype=dtype) for i in range(6)}
    x = torch.randn(64, 4096, device=dev, dtype=dtype)
    loop = Loop(duration, on_ready)
    for _ in loop:
        for w in state.values():
            x = torch.tanh(x @ w)
        staged = stage_state_dict(torch, state)
        x.sum().item()
        for host in staged.values():
            _unregister(torch, host)
    return loop.count


# -- a memory-mapped file, its pages faulting in from storage ----------------------------------------------

@contextmanager
def _mapped_file(size: int, write: Callable[[Any], None]) -> Iterator[tuple[int, mmap.mmap]]:
    """A file of ``size`` bytes written by ``write``, flushed to storage and mapped read-only, random access."""
    with tempfile.TemporaryFile(dir=os.environ.get("GPUWATCH_FAULT_DIR")) as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
        mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        if hasattr(mmap, "MADV_RANDOM"):
            mm.madvise(mmap.MADV_RANDOM)  # no read-ahead: each page touched is a fault of its own
        yield f.fileno(), mm


def _evict(fd: int, mm: mmap.mmap) -> None:
    """Memory pressure taking the mapping's pages back: unmapped from the process, dropped from the cache."""
    if hasattr(mmap, "MADV_DONTNEED"):
        mm.madvise(mmap.MADV_DONTNEED)
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _write_random(size: int) -> Callable[[Any], None]:
    def write(f: Any) -> None:
        block = os.urandom(1 << 20)
        for _ in range(size >> 20):
            f.write(block)
    return write


def lookup_rows(np: Any, table: Any, ids: Any) -> Any:
    """The batch's embedding rows gathered from the mapped table: each row a page that faults in from storage."""
    return np.ascontiguousarray(table[ids])


def mmap_embedding_lookup(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """A 512 MiB embedding table (4 KiB rows) memory-mapped from a file; each batch gathers 1024 random rows
    whose pages the kernel has dropped since, then a GPU layer."""
    import numpy as np

    size, dim = 512 << 20, 1024
    rng = np.random.default_rng(0)
    w = torch.randn(dim, 256, device=dev)
    with _mapped_file(size, _write_random(size)) as (fd, mm):
        table = np.frombuffer(mm, dtype=np.float32).reshape(-1, dim)
        loop = Loop(duration, on_ready)
        for _ in loop:
            _evict(fd, mm)
            rows = lookup_rows(np, table, rng.integers(0, table.shape[0], 1024))
            (torch.from_numpy(np.nan_to_num(rows)).to(dev) @ w).sum().item()
        del table
    return loop.count


def read_weight_columns(np: Any, weights: Any, start: int) -> Any:
    """A slice of 256 columns of the mapped weights: one page from every one of its 2048 rows."""
    return np.ascontiguousarray(weights[:, start:start + 256])


def mmap_strided_weights(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """Weights saved with np.save (2048 x 65536 FP32, 512 MiB) and memory-mapped; each step reads a column
    block (one expert's slice) after the kernel has dropped the pages, and multiplies it on the GPU (FP16)."""
    import numpy as np

    rows, cols = 2048, 65536
    dtype = torch.float16 if dev.type == "cuda" else torch.float32

    def write(f: Any) -> None:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (rows, cols)})
        _write_random(rows * cols * 4)(f)

    with tempfile.TemporaryFile() as probe:
        np.lib.format.write_array_header_1_0(probe, {"descr": "<f4", "fortran_order": False, "shape": (rows, cols)})
        header = probe.tell()
    x = torch.randn(64, rows, device=dev, dtype=dtype)
    with _mapped_file(header + rows * cols * 4, write) as (fd, mm):
        weights = np.ndarray((rows, cols), dtype=np.float32, buffer=mm, offset=header)
        loop = Loop(duration, on_ready)
        for n in loop:
            _evict(fd, mm)
            block = read_weight_columns(np, weights, (n * 256) % cols)
            (x @ torch.from_numpy(np.nan_to_num(block)).to(dev, dtype)).sum().item()
        del weights
    return loop.count


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "gc_collect_per_batch": gc_collect_per_batch, "gc_gen2_churn": gc_gen2_churn,
    "tensor_from_nested_list": tensor_from_nested_list, "tensor_from_ndarray_list": tensor_from_ndarray_list,
    "pin_register_per_batch": pin_register_per_batch, "pin_checkpoint_staging": pin_checkpoint_staging,
    "mmap_embedding_lookup": mmap_embedding_lookup, "mmap_strided_weights": mmap_strided_weights,
    **fault_hidden_peers.BODIES, **fault_hidden_waits.BODIES,
}
