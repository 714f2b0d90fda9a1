"""Runs one stage end to end: worker processes, the model, the serving loop, the numbers.

torch is imported here, lazily from the CLI: gpuwatch works without it, and ``gpuwatch workload`` then
says how to install torch.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from gpuwatch.workload.config import Result, WorkloadConfig, summarise
from gpuwatch.workload.frontend import AttachmentStore, Frontend, FrontendSpec, schedule_for, worker_main

#: Right for a source install (the package is not on PyPI): torch into gpuwatch's own environment, CPU build.
INSTALL_HINT = ("install it into gpuwatch's environment: `pip install torch --index-url "
                "https://download.pytorch.org/whl/cpu` (the CPU build; drop --index-url for CUDA), or with pipx "
                "`pipx inject gpuwatch-monitor torch`")


class WorkloadError(RuntimeError):
    """The workload cannot run here (no torch, no CUDA device): the message says what to do."""


def _import_torch() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "Failed to initialize NumPy" on numpy-less installs
        try:
            import torch
        except ImportError:
            raise WorkloadError(f"torch is not installed: {INSTALL_HINT}") from None
    return torch


@contextlib.contextmanager
def _workers(cfg: WorkloadConfig, spec_dir: Any, chunk: int,
             shared: tuple[Any, Any] = (None, None)) -> Iterator[tuple[Any, Any]]:
    """N preprocessing processes (spawned: they never inherit CUDA state), a queue and the permits."""
    ctx = mp.get_context("spawn")
    inbox, permits, stop = ctx.Queue(), ctx.Semaphore(cfg.in_flight()), ctx.Event()
    procs = [ctx.Process(target=worker_main, name=f"gpuwatch-prep-{i}", daemon=True,
                         args=(FrontendSpec(cfg, i, spec_dir), inbox, permits, stop, chunk, *shared))
             for i in range(cfg.workers)]
    for p in procs:
        p.start()
    try:
        yield inbox, permits
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=2.0)
            if p.is_alive():
                p.terminate()
        inbox.cancel_join_thread()
        inbox.close()


def run_stage(cfg: WorkloadConfig, on_ready: Callable[[], None] = lambda: None) -> Result:
    torch = _import_torch()
    from gpuwatch.workload.engine import EagerEngine, make_engine
    from gpuwatch.workload.model import build_model, max_relative_error, to_bf16
    from gpuwatch.workload.serve import Window

    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise WorkloadError("--device cuda: torch sees no CUDA device here (torch "
                            f"{torch.__version__}); use --device cpu, or a CUDA build of torch")
    device = torch.device(cfg.device)
    if device.type == "cpu":
        # The model's thread pool spins between ops: leave the preprocessing workers their cores; a tiny
        # model gains nothing from threads and stalls when a busy machine deschedules one of them.
        spare = (os.cpu_count() or 2) - (cfg.workers if cfg.uses_workers else 0)
        torch.set_num_threads(1 if cfg.size == "tiny" else max(1, spare))
    attachments = AttachmentStore.create() if cfg.io else None
    notes: dict[str, Any] = {"workers": cfg.workers if cfg.uses_workers else 0,
                             "in_flight": cfg.in_flight(), "torch": torch.__version__,
                             "offered_rate": cfg.rate or "closed loop"}
    if cfg.batched:
        notes.update(max_batch_delay_ms=cfg.max_batch_delay_ms, queue_timeout_ms=cfg.queue_timeout_ms)
    book, shared = _phase_book(cfg)
    try:
        with contextlib.ExitStack() as stack:
            pipe = (stack.enter_context(_workers(cfg, attachments, 8 if cfg.batched else 1, shared))
                    if cfg.uses_workers else None)
            model = build_model(cfg.model, cfg.device, seed=cfg.seed)
            caps = cfg.caps()
            if cfg.stage == "bf16":
                half = to_bf16(model)
                ids, lengths = _check_batch(cfg, device)
                notes["bf16_check"] = max_relative_error(model, half, ids, lengths)
                model = half  # the FP32 copy is dropped here
            if device.type == "cuda":
                torch.cuda.empty_cache()
            engine: Any = EagerEngine(model, device)
            if cfg.stage in ("compiled", "bf16"):
                engine, compile_notes = make_engine(cfg.compiler, model, device, caps)
                notes.update(compile_notes)
            window = Window(cfg.warmup_s, cfg.duration_s, on_ready, book)
            try:
                _serve(cfg, model, engine, device, pipe, caps, window, attachments, shared)
            except TimeoutError as exc:
                raise WorkloadError(str(exc)) from None
            if device.type == "cuda":
                torch.cuda.synchronize()
                notes["gpu_memory_peak_bytes"] = int(torch.cuda.max_memory_allocated())
    finally:
        if attachments is not None:
            shutil.rmtree(attachments, ignore_errors=True)
    result = summarise(cfg, window.latencies, window.elapsed, window.batches, notes, shed=window.shed)
    if book is not None:
        result.phases = book.results()
    return result


def _phase_book(cfg: WorkloadConfig) -> tuple[Any, tuple[Any, Any]]:
    """Under a phase plan: the serving side's book, and the control and missed-arrival counters the load
    generators share with it (in shared memory when they are worker processes)."""
    if not cfg.plan:
        return None, (None, None)
    from gpuwatch.workload.phases import WARMUP, Control, PhaseBook, Plan

    plan = Plan.from_json(cfg.plan)
    control: Any
    missed: Any
    if cfg.uses_workers:
        ctx = mp.get_context("spawn")
        control, missed = ctx.Array("d", [float(WARMUP), 0.0, 0.0]), ctx.Array("i", len(plan.phases))
    else:
        control, missed = [float(WARMUP), 0.0, 0.0], [0] * len(plan.phases)
    return PhaseBook(plan, Control(control), missed, cfg.slo_ms), (control, missed)


def _serve(cfg: WorkloadConfig, model: Any, engine: Any, device: Any, pipe: tuple[Any, Any] | None,
           caps: dict[int, int], window: Any, attachments: Any, shared: tuple[Any, Any]) -> None:
    from gpuwatch.workload import serve

    if pipe is None:
        spec = FrontendSpec(cfg, 0, attachments)
        serve.serve_naive(model, device, Frontend(spec, schedule_for(spec, *shared)), window)
    elif not cfg.batched:
        serve.serve_per_request(model, device, pipe[0], pipe[1], window)
    else:
        serve.serve_batched(engine, device, pipe[0], pipe[1], caps, window,
                            max_delay_s=cfg.max_batch_delay_ms / 1000.0, timeout_s=cfg.queue_timeout_ms / 1000.0)


def _check_batch(cfg: WorkloadConfig, device: Any) -> tuple[Any, Any]:
    """A batch of real preprocessed requests, padded to the longest bucket, for the BF16-vs-FP32 check."""
    import torch

    from gpuwatch.workload.text import PAD

    frontend = Frontend(FrontendSpec(cfg, 10_000, None))
    longest = cfg.model.buckets[-1]
    rows, lengths = [], []
    for _ in range(16):
        _t, n, _b, payload = frontend.make()  # documents of the run's traffic, made now
        ids = torch.frombuffer(bytearray(payload), dtype=torch.int32)[:n]
        rows.append(torch.nn.functional.pad(ids, (0, longest - n), value=PAD))
        lengths.append(n)
    return torch.stack(rows).to(device), torch.tensor(lengths, dtype=torch.int32, device=device)
