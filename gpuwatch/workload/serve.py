"""The serving loops, one per way of feeding the GPU, and the measuring window they report into.

* :func:`serve_naive`: the serving thread makes, preprocesses and runs each request itself;
* :func:`serve_per_request`: requests come preprocessed from worker processes, but each is still copied
  with a blocking ``.to(device)`` and run alone at its own length;
* :func:`serve_batched`: requests are grouped per length bucket into batches that grow while the GPU is
  busy, copied from pinned memory without blocking, with up to two batches in flight; the loop keeps
  reading the workers' queue while they run.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import torch

from gpuwatch.workload.engine import EagerEngine, GraphEngine
from gpuwatch.workload.frontend import Frontend, Item
from gpuwatch.workload.phases import PhaseBook

MAX_IN_FLIGHT = 2
MAX_WAIT_S = 0.005
#: How long the batching loop waits for new requests while a batch runs, before it polls the GPU again.
POLL_S = 0.0003
STARTUP_TIMEOUT_S = 120.0


class Window:
    """Counts only requests that finish between the end of the warm-up and the end of the run. The
    warm-up starts with the first finished request, so slow worker start-up never counts. With a phase
    ``book`` the run lasts as long as its plan, and every answer is also filed under its phase."""

    def __init__(self, warmup_s: float, duration_s: float, on_ready: Callable[[], None],
                 book: PhaseBook | None = None) -> None:
        self.created = time.monotonic()
        self.t0: float | None = None
        self.warmup_s = warmup_s
        self.duration_s = duration_s
        self.on_ready = on_ready
        self.start: float | None = None
        self.end = float("inf")
        self.latencies: list[float] = []
        self.batches = 0
        self.shed = 0
        self.book = book

    def tick(self) -> bool:
        """False once the window is over; starts it when the warm-up is done."""
        now = time.monotonic()
        if self.t0 is None and now - self.created > STARTUP_TIMEOUT_S:
            raise TimeoutError(f"no request finished within {STARTUP_TIMEOUT_S:g} s of start: "
                               "did the preprocessing workers start?")
        if self.start is None and self.t0 is not None and now - self.t0 >= self.warmup_s:
            self.start, self.end = now, now + self.duration_s
            if self.book is not None:
                self.end = float("inf")
                self.book.start()
            self.on_ready()
        if self.book is not None and self.start is not None and not self.book.advance():
            self.end = min(self.end, now)
        return now < self.end

    def stale(self, arrival: float) -> bool:
        """Whether a request arrived in a phase that is over (it is dropped, counted unanswered there)."""
        return self.book is not None and self.start is not None and arrival < self.book.current_start

    def drop(self, arrival: float) -> None:
        if self.book is not None:
            self.book.unanswered(arrival)

    def record(self, arrivals: list[float], batch: bool = True) -> None:
        now = time.monotonic()
        if self.t0 is None:
            self.t0 = now
        if self.start is not None and now >= self.start:
            self.latencies.extend(now - a for a in arrivals)
            self.batches += 1 if batch else len(arrivals)
            if self.book is not None:
                for a in arrivals:
                    self.book.answered(a, now - a)

    def record_shed(self, arrivals: list[float]) -> None:
        if self.start is not None and time.monotonic() >= self.start:
            self.shed += len(arrivals)
            if self.book is not None:
                for a in arrivals:
                    self.book.shed(a)

    @property
    def elapsed(self) -> float:
        return 0.0 if self.start is None else min(time.monotonic(), self.end) - self.start


def _run_one(model: torch.nn.Module, payload: bytes, n: int, device: torch.device) -> None:
    ids = torch.frombuffer(bytearray(payload), dtype=torch.int32)[:n].view(1, n)
    with torch.inference_mode():
        out = model(ids.to(device), None)  # pageable memory: the copy blocks; n varies per request
        out.cpu()  # and so does fetching the result


def serve_naive(model: torch.nn.Module, device: torch.device, frontend: Frontend, window: Window) -> None:
    while window.tick():
        got = frontend.poll()
        if isinstance(got, float):
            time.sleep(got)
            continue
        arrival, n, _bucket, payload = got
        _run_one(model, payload, n, device)
        window.record([arrival], batch=False)
    if window.book is not None:
        frontend.due()  # the plan is over: what was due and never made counts against its phase


def drain(window: Window, inbox: Any, waiting: list[Item] | None = None) -> None:
    """Once a plan is over: requests still queued were never answered; file them under their phase."""
    if window.book is None:
        return
    items = list(waiting or [])
    while True:
        try:
            items.extend(inbox.get_nowait())
        except (queue.Empty, OSError, ValueError):
            break
    for it in items:
        window.drop(it[0])


def serve_per_request(model: torch.nn.Module, device: torch.device, inbox: Any, permits: Any,
                      window: Window) -> None:
    while window.tick():
        try:
            items: list[Item] = inbox.get(timeout=0.05)
        except queue.Empty:
            continue
        for arrival, n, _bucket, payload in items:
            if window.stale(arrival):
                window.drop(arrival)
                permits.release()
                continue
            _run_one(model, payload, n, device)
            window.record([arrival], batch=False)
            permits.release()
    drain(window, inbox)


class Batcher:
    """Holds preprocessed requests per bucket and decides when a batch goes, like a server's batcher with a
    latency budget. An idle GPU takes the oldest bucket at once, whatever its size (at a light load nobody
    waits for company). While the GPU is busy, a second batch goes only when it is worth it: a full
    bucket, or one whose oldest request waited ``max_delay_s`` (so no bucket starves behind busier ones).
    Requests queued longer than ``timeout_s`` are shed: past capacity the queue stays bounded in time.

    ``sizes`` (per bucket, ascending) are the batch sizes an engine runs without padding (CUDA graphs): a
    batch formed while the GPU is busy is cut to the largest of them, and the rest waits for the next one,
    so at full load no row is computed for nothing."""

    def __init__(self, inbox: Any, caps: dict[int, int], max_delay_s: float = MAX_WAIT_S,
                 timeout_s: float = float("inf"), sizes: dict[int, list[int]] | None = None) -> None:
        self.inbox = inbox
        self.caps = caps
        self.max_delay_s = max_delay_s
        self.timeout_s = timeout_s
        self.sizes = sizes
        self.waiting: dict[int, deque[Item]] = {b: deque() for b in caps}

    def pull(self, timeout: float) -> None:
        """Move everything the workers sent into the buckets, waiting up to ``timeout`` for the first."""
        try:
            items: list[Item] = self.inbox.get(timeout=timeout) if timeout > 0 else self.inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            for item in items:
                self.waiting[item[2]].append(item)
            try:
                items = self.inbox.get_nowait()
            except queue.Empty:
                return

    def shed(self, now: float | None = None) -> list[float]:
        """Drop the requests that waited longer than the timeout; their arrival times."""
        now = time.monotonic() if now is None else now
        dropped: list[float] = []
        for q in self.waiting.values():
            while q and now - q[0][0] > self.timeout_s:
                dropped.append(q.popleft()[0])
        return dropped

    def take(self, gpu_idle: bool, now: float | None = None) -> tuple[int, list[Item]] | None:
        """The next batch, or None to wait for more requests."""
        now = time.monotonic() if now is None else now
        heads = [(q[0][0], b) for b, q in self.waiting.items() if q]
        if not heads:
            return None
        due = [(t, b) for t, b in heads if now - t >= self.max_delay_s]
        full = [(t, b) for t, b in heads if len(self.waiting[b]) >= self.caps[b]]
        pick = heads if gpu_idle else (due or full)
        if not pick:
            return None
        _oldest, bucket = min(pick)
        q = self.waiting[bucket]
        count = min(len(q), self.caps[bucket])
        if self.sizes is not None and not gpu_idle:
            count = max(s for s in self.sizes[bucket] if s <= count)
        return bucket, [q.popleft() for _ in range(count)]


def pinned_batch(bucket: int, items: list[Item], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """One host batch from padded rows: a single join and one copy into pinned memory."""
    ids = torch.frombuffer(bytearray(b"".join(it[3] for it in items)), dtype=torch.int32).view(len(items), bucket)
    lengths = torch.tensor([it[1] for it in items], dtype=torch.int32)
    if device.type == "cuda":
        ids, lengths = ids.pin_memory(), lengths.pin_memory()
    return ids, lengths


def serve_batched(engine: EagerEngine | GraphEngine, device: torch.device, inbox: Any, permits: Any,
                  caps: dict[int, int], window: Window, max_delay_s: float = MAX_WAIT_S,
                  timeout_s: float = float("inf")) -> None:
    """The batching server's loop. It never blocks on the GPU: while batches run it keeps draining the
    workers' queue (whose pipe holds only ~64 kB: a loop that stopped reading while it waited would see
    at most that much per batch) and polls the oldest batch's completion event."""
    batcher = Batcher(inbox, caps, max_delay_s, timeout_s, sizes=getattr(engine, "sizes", None))
    # (completion event, logits in pinned host memory, arrival times) per batch on the GPU
    in_flight: deque[tuple[Any, torch.Tensor, list[float]]] = deque()

    def finish_ready() -> None:
        while in_flight and in_flight[0][0].query():
            _event, logits, arrivals = in_flight.popleft()
            logits.argmax(dim=1)  # the answer each client gets
            window.record(arrivals)
            for _ in arrivals:
                permits.release()

    while window.tick():
        batcher.pull(timeout=0.0)
        finish_ready()
        if shed := batcher.shed():
            window.record_shed(shed)
            for _ in shed:
                permits.release()  # the client got its "overloaded" answer
        batch = batcher.take(gpu_idle=not in_flight) if len(in_flight) < MAX_IN_FLIGHT else None
        if batch is None:
            batcher.pull(timeout=POLL_S if in_flight else 0.02)
            continue
        bucket, items = batch
        if window.book is not None:  # requests of a phase that is over are dropped, not run
            for it in items:
                if window.stale(it[0]):
                    window.drop(it[0])
                    permits.release()
            items = [it for it in items if not window.stale(it[0])]
            if not items:
                continue
        ids, lengths = pinned_batch(bucket, items, device)
        logits, event = engine.submit(ids, lengths)
        in_flight.append((event, logits, [it[0] for it in items]))
    for event, _, _ in in_flight:
        event.synchronize()
    drain(window, inbox, [it for q in batcher.waiting.values() for it in q])
