"""The load generator's clients and the preprocessing stage, in one place: a request is drawn, its
attachment read (``--io``), its document tokenised, and the result queued for the GPU loop.

In the naive stage the serving thread calls :meth:`Frontend.make` itself; from the workers stage on,
N processes run :func:`worker_main`. Closed loop: a request is only made when a permit is free (the
GPU loop returns one per finished request), so the number in flight stays at the configured concurrency.
No torch here: worker processes must start fast and never touch the GPU.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch.workload.config import WorkloadConfig
from gpuwatch.workload.text import PAD, DocumentSource, FastTokenizer, SlowTokenizer, bucket_for, build_vocab

#: One preprocessed request: (arrival time on the monotonic clock, tokens, bucket, int32 ids as bytes).
Item = tuple[float, int, int, bytes]

BURST_PERIOD_S = 0.4
BURST_ON_S = 0.2
ATTACHMENTS = 8
POOL = 48


class AttachmentStore:
    """Attachments on a slow shared store: every read costs ``latency_ms`` (a network file system round
    trip) before the bytes come back; with ``cache`` each attachment is read once and kept in memory."""

    def __init__(self, directory: Path, latency_ms: float, cache: bool) -> None:
        self.directory = directory
        self.latency_s = latency_ms / 1000.0
        self.cache: dict[int, bytes] | None = {} if cache else None

    @staticmethod
    def create(count: int = ATTACHMENTS, size: int = 16384) -> Path:
        directory = Path(tempfile.mkdtemp(prefix="gpuwatch-attachments-"))
        for i in range(count):
            (directory / f"{i}.bin").write_bytes(os.urandom(size))
        return directory

    def read(self, key: int) -> bytes:
        key %= ATTACHMENTS
        if self.cache is not None and key in self.cache:
            return self.cache[key]
        time.sleep(self.latency_s)
        data = (self.directory / f"{key}.bin").read_bytes()
        if self.cache is not None:
            self.cache[key] = data
        return data


@dataclass(frozen=True)
class FrontendSpec:
    cfg: WorkloadConfig
    index: int
    attachments: Path | None


class Frontend:
    """Makes requests and preprocesses them, the slow way (naive) or the fast way (workers)."""

    def __init__(self, spec: FrontendSpec) -> None:
        cfg = spec.cfg
        size = cfg.model
        vocab, words = build_vocab(size.vocab)
        source = DocumentSource(words, size.doc_words, cfg.traffic, seed=cfg.seed * 1000 + spec.index,
                                longtail_median=size.buckets[-1] // 2)
        self.pool = source.pool(POOL)
        self.buckets = size.buckets
        self.pad = cfg.batched
        max_len = size.buckets[-1]
        self.tokenizer = SlowTokenizer(vocab, max_len) if cfg.stage == "naive" else FastTokenizer(vocab, max_len)
        self.store = (AttachmentStore(spec.attachments, cfg.io_latency_ms, cfg.cache)
                      if cfg.io and spec.attachments is not None else None)
        self.bursty = cfg.traffic == "bursty"
        self.count = spec.index * 7919
        self.rate = cfg.rate / (cfg.workers if cfg.uses_workers else 1)
        self.rng = random.Random(cfg.seed * 7 + spec.index)
        self.next_at: float | None = None

    def wait_for_burst(self) -> float:
        """Seconds until traffic is on again (0 when on): bursty traffic is on 200 ms of every 400 ms."""
        if not self.bursty:
            return 0.0
        phase = time.monotonic() % BURST_PERIOD_S
        return 0.0 if phase < BURST_ON_S else BURST_PERIOD_S - phase

    def arrive(self) -> float:
        """When the next request arrives: now (closed loop), or on a Poisson schedule at ``rate`` (open loop:
        a server that falls behind makes requests wait, and their latency counts the wait)."""
        now = time.monotonic()
        if self.rate <= 0:
            return now
        if self.next_at is None:
            self.next_at = now
        arrival = self.next_at
        self.next_at += self.rng.expovariate(self.rate)
        if arrival > now:
            time.sleep(arrival - now)
        return arrival

    def wait_s(self) -> float:
        """Seconds until the next request arrives (0 in closed loop, or when the schedule is behind)."""
        if self.rate <= 0 or self.next_at is None:
            return 0.0
        return max(0.0, self.next_at - time.monotonic())

    def make(self) -> Item:
        arrival = self.arrive()
        self.count += 1
        if self.store is not None:
            self.store.read(self.count)
        ids = self.tokenizer.encode(self.pool[self.count % len(self.pool)])
        n = len(ids)
        bucket = bucket_for(n, self.buckets)
        if self.pad:
            ids.extend([PAD] * (bucket - n))
        return (arrival, n, bucket, array("i", ids).tobytes())


def worker_main(spec: FrontendSpec, out_q: Any, permits: Any, stop: Any, chunk: int) -> None:
    """A preprocessing process: make requests while permits last, send them in chunks of up to ``chunk``."""
    out_q.cancel_join_thread()  # never block exit on a queue nobody reads any more
    parent = os.getppid()
    frontend = Frontend(spec)
    pending: list[Item] = []
    while not stop.is_set():
        if os.getppid() != parent:
            return  # the serving process died without telling us: do not linger as an orphan
        pause = frontend.wait_for_burst()
        if pause > 0:
            if pending:
                out_q.put(pending)
                pending = []
            stop.wait(pause)
            continue
        wait = frontend.wait_s()
        if wait > 0:  # open loop: send what is made now, not when a chunk fills; wake up early to stop
            if pending:
                out_q.put(pending)
                pending = []
            stop.wait(wait)
            continue
        if not permits.acquire(block=not pending, timeout=0.05 if not pending else None):
            if pending:
                out_q.put(pending)
                pending = []
            continue
        pending.append(frontend.make())
        if len(pending) >= chunk:
            out_q.put(pending)
            pending = []
