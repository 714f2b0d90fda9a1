"""The load generator's clients and the preprocessing stage, in one place: a request is drawn, its
attachment read (``--io``), its document tokenised, and the result queued for the GPU loop.

In the naive stage the serving thread calls :meth:`Frontend.poll` itself; from the workers stage on,
N processes run :func:`worker_main`. Closed loop: a request is only made when a permit is free (the
GPU loop returns one per finished request), so the number in flight stays at the configured concurrency;
open loop the permits only bound memory.
No torch here: worker processes must start fast and never touch the GPU.
"""

from __future__ import annotations

import os
import tempfile
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwatch.workload.arrivals import BURST_ON_S, BURST_PERIOD_S, Arrivals
from gpuwatch.workload.config import WorkloadConfig
from gpuwatch.workload.phases import Control, Plan, Schedule
from gpuwatch.workload.text import PAD, DocumentSource, FastTokenizer, SlowTokenizer, bucket_for, build_vocab

#: One preprocessed request: (arrival time on the monotonic clock, tokens, bucket, int32 ids as bytes).
Item = tuple[float, int, int, bytes]

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
    """Makes requests and preprocesses them, the slow way (naive) or the fast way (workers).

    Requests arrive as the traffic says (:meth:`poll`): closed loop, at once; open loop (``--rate``), on the
    shape's schedule; under a phase plan, on the schedule of the phase now running. ``clock`` is the
    monotonic clock every process shares (a test passes a fake one)."""

    def __init__(self, spec: FrontendSpec, schedule: Schedule | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        cfg = spec.cfg
        size = cfg.model
        vocab, words = build_vocab(size.vocab)
        self.pools: dict[str, list[str]] = {}
        for kind in ("steady", "longtail"):  # bursty requests carry the same documents as steady ones
            source = DocumentSource(words, size.doc_words, kind, seed=cfg.seed * 1000 + spec.index,
                                    longtail_median=size.buckets[-1] // 2)
            self.pools[kind] = source.pool(POOL)
        self.buckets = size.buckets
        self.pad = cfg.batched
        max_len = size.buckets[-1]
        self.tokenizer = SlowTokenizer(vocab, max_len) if cfg.stage == "naive" else FastTokenizer(vocab, max_len)
        self.store = (AttachmentStore(spec.attachments, cfg.io_latency_ms, cfg.cache)
                      if cfg.io and spec.attachments is not None else None)
        self.traffic = cfg.traffic
        self.bursty = cfg.traffic == "bursty"
        self.count = spec.index * 7919
        self.rate = cfg.rate / (cfg.workers if cfg.uses_workers else 1)
        self.seed = cfg.seed * 7 + spec.index
        self.schedule = schedule
        self.clock = clock
        self.arrivals: Arrivals | None = None

    @property
    def open_loop(self) -> bool:
        return self.schedule is not None or self.rate > 0

    def wait_for_burst(self) -> float:
        """Closed loop, bursty: seconds until traffic is on again (0 when on), 200 ms on of every 400 ms."""
        if not self.bursty:
            return 0.0
        phase = self.clock() % BURST_PERIOD_S  # one grid for every process: the bursts line up
        return 0.0 if phase < BURST_ON_S else BURST_PERIOD_S - phase

    def due(self) -> tuple[float, str] | float:
        """The next request's arrival (its scheduled time and kind) once it is due, else seconds to wait.
        Open loop, the time is the schedule's, however late the caller is: a server that falls behind makes
        requests wait, and their latency counts the wait."""
        now = self.clock()
        if self.schedule is not None:
            return self.schedule.due(now)
        if self.rate > 0:
            if self.arrivals is None:
                grid = now - now % BURST_PERIOD_S  # every worker's bursts on one grid
                self.arrivals = Arrivals(self.traffic, self.rate, grid, self.seed)
            t = self.arrivals.peek()
            return self.arrivals.next() if t <= now else min(t - now, 0.05)
        pause = self.wait_for_burst()
        return pause if pause > 0 else (now, self.traffic)

    def poll(self) -> Item | float:
        """The next request, made and preprocessed, once it is due; else seconds to wait."""
        due = self.due()
        if isinstance(due, float):
            return due
        return self.make(*due)

    def make(self, arrival: float | None = None, kind: str | None = None) -> Item:
        arrival = self.clock() if arrival is None else arrival
        self.count += 1
        if self.store is not None:
            self.store.read(self.count)
        pool = self.pools["longtail" if (kind or self.traffic) == "longtail" else "steady"]
        ids = self.tokenizer.encode(pool[self.count % len(pool)])
        n = len(ids)
        bucket = bucket_for(n, self.buckets)
        if self.pad:
            ids.extend([PAD] * (bucket - n))
        return (arrival, n, bucket, array("i", ids).tobytes())


def schedule_for(spec: FrontendSpec, control: Any, missed: Any) -> Schedule | None:
    """This generator's share of the phase plan's arrivals (None without a plan)."""
    cfg = spec.cfg
    if not cfg.plan:
        return None
    share = 1.0 / (cfg.workers if cfg.uses_workers else 1)
    return Schedule(Plan.from_json(cfg.plan), Control(control), share, cfg.seed * 7 + spec.index, missed)


def worker_main(spec: FrontendSpec, out_q: Any, permits: Any, stop: Any, chunk: int,
                control: Any = None, missed: Any = None) -> None:
    """A preprocessing process: make requests as they arrive while permits last, send them in chunks of up to
    ``chunk`` (at once whenever the next arrival is not due yet)."""
    out_q.cancel_join_thread()  # never block exit on a queue nobody reads any more
    parent = os.getppid()
    frontend = Frontend(spec, schedule_for(spec, control, missed))
    pending: list[Item] = []
    permit = False

    def flush() -> None:
        if pending:
            out_q.put(list(pending))
            pending.clear()

    while not stop.is_set():
        if os.getppid() != parent:
            return  # the serving process died without telling us: do not linger as an orphan
        if not permit:
            permit = permits.acquire(block=not pending, timeout=0.05 if not pending else None)
            if not permit:
                flush()
                continue
        got = frontend.poll()
        if isinstance(got, float):
            flush()  # send what is made now, not when a chunk fills; wake up early to stop
            stop.wait(got)
            continue
        pending.append(got)
        permit = False
        if len(pending) >= chunk:
            flush()
