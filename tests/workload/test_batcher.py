"""The batcher's latency budget: a batch leaves after the max batch delay, full or not; no bucket starves
behind full ones; requests queued past the timeout are shed; open-loop requests are not held back."""

from __future__ import annotations

import queue
import time
from types import SimpleNamespace
from typing import Any

import pytest
from tools import require_torch

torch = require_torch()

from gpuwatch.workload.config import WorkloadConfig  # noqa: E402
from gpuwatch.workload.frontend import Item  # noqa: E402
from gpuwatch.workload.run import _workers, run_stage  # noqa: E402
from gpuwatch.workload.serve import Batcher, Window, serve_batched  # noqa: E402

pytestmark = pytest.mark.torch  # CI's second pass, with torch's CPU build


def item(arrival: float, bucket: int) -> Item:
    return (arrival, bucket, bucket, b"")


def batcher(*items: Item, caps: dict[int, int] | None = None, timeout_s: float = 1.0) -> Batcher:
    b = Batcher(queue.Queue(), caps or {16: 4, 32: 4}, max_delay_s=0.005, timeout_s=timeout_s)
    for it in items:
        b.waiting[it[2]].append(it)
    return b


def test_a_partial_batch_waits_while_the_gpu_is_busy_and_goes_after_the_max_batch_delay() -> None:
    b = batcher(item(10.0, 16), item(10.001, 16))
    assert b.take(gpu_idle=False, now=10.004) is None
    taken = b.take(gpu_idle=False, now=10.005)
    assert taken is not None and taken[0] == 16 and len(taken[1]) == 2


def test_an_idle_gpu_takes_the_oldest_requests_at_once() -> None:
    b = batcher(item(10.0, 32), item(10.0005, 16))
    taken = b.take(gpu_idle=True, now=10.001)
    assert taken is not None and taken[0] == 32


def test_a_bucket_past_its_delay_goes_before_a_full_one_so_it_never_starves() -> None:
    b = batcher(item(9.0, 32), *(item(10.0 + i / 1000, 16) for i in range(4)))
    first = b.take(gpu_idle=False, now=10.004)
    assert first is not None and first[0] == 32  # waited 1 s; the full bucket 16 is younger
    second = b.take(gpu_idle=False, now=10.004)
    assert second is not None and second[0] == 16 and len(second[1]) == 4


def test_a_batch_formed_while_the_gpu_is_busy_is_cut_to_a_size_the_engine_runs_unpadded() -> None:
    b = Batcher(queue.Queue(), {16: 8}, max_delay_s=0.005, sizes={16: [1, 2, 4, 8]})
    b.waiting[16].extend(item(10.0 + i / 1000, 16) for i in range(7))
    busy = b.take(gpu_idle=False, now=10.01)
    assert busy is not None and len(busy[1]) == 4  # 7 waiting: 4 go now, 3 with the next batch
    idle = b.take(gpu_idle=True, now=10.01)
    assert idle is not None and len(idle[1]) == 3  # an idle GPU takes everything (padded to 4)


class SlowGpu:
    """An engine that runs one batch at a time, each for ``seconds``; it records the batch sizes it got."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.batches: list[int] = []
        self.free_at = 0.0

    def submit(self, ids: Any, lengths: Any) -> tuple[Any, Any]:
        self.batches.append(int(ids.shape[0]))
        done_at = self.free_at = max(time.monotonic(), self.free_at) + self.seconds  # one batch at a time
        event = SimpleNamespace(query=lambda: time.monotonic() >= done_at,
                                synchronize=lambda: time.sleep(max(0.0, done_at - time.monotonic())))
        return torch.zeros((int(ids.shape[0]), 2)), event


def test_the_loop_keeps_reading_the_workers_queue_while_batches_run_so_full_load_fills_batches() -> None:
    # Real preprocessing processes send 1 kB requests through a multiprocessing queue, whose pipe holds
    # ~64 kB: a loop that blocked on the GPU between reads got about one pipe's worth (~60 requests) per
    # batch, however many waited behind it. A loop that keeps reading fills each batch to its cap.
    bucket, cap = 256, 128
    cfg = WorkloadConfig(stage="batched", device="cpu", size="base", workers=3, concurrency=3 * cap)
    gpu = SlowGpu(0.3)
    window = Window(warmup_s=0.6, duration_s=1.5, on_ready=lambda: None)
    with _workers(cfg, None, 8) as (inbox, permits):
        serve_batched(gpu, torch.device("cpu"), inbox, permits, {64: cap, 128: cap, bucket: cap}, window)
    steady = gpu.batches[len(gpu.batches) // 2:]
    assert sum(steady) / len(steady) > 0.9 * cap, gpu.batches


def test_a_batch_never_exceeds_its_bucket_cap() -> None:
    b = batcher(*(item(10.0 + i / 1000, 16) for i in range(10)))
    taken = b.take(gpu_idle=True, now=10.02)
    assert taken is not None and len(taken[1]) == 4 and len(b.waiting[16]) == 6


def test_requests_queued_past_the_timeout_are_shed_and_younger_ones_kept() -> None:
    b = batcher(item(9.0, 16), item(9.4, 32), item(9.8, 16), timeout_s=0.5)
    assert sorted(b.shed(now=10.0)) == [9.0, 9.4]
    assert [it[0] for it in b.waiting[16]] == [9.8] and not b.waiting[32]


@pytest.mark.serial  # latency and rates against a bound: alone, not beside other tests
def test_at_a_light_open_loop_load_a_batched_stage_answers_within_milliseconds() -> None:
    # 4 workers at 40 req/s: 10 req/s each. A worker that waited for a chunk of 8 before sending would
    # hold requests for most of a second; the batcher's budget sends each within a few ms.
    result = run_stage(WorkloadConfig(stage="batched", device="cpu", size="tiny", duration_s=1.5,
                                      warmup_s=0.3, workers=4, rate=40.0))
    assert result.requests > 20 and result.p99_ms is not None
    assert result.p99_ms < 100.0, result
    assert result.shed == 0 and result.mean_batch is not None and result.mean_batch < 3


@pytest.mark.serial  # latency and rates against a bound: alone, not beside other tests
def test_past_capacity_the_queue_timeout_bounds_latency_and_counts_what_it_shed() -> None:
    # 3000 clients in a closed loop: without the timeout each would queue behind the other 2999.
    result = run_stage(WorkloadConfig(stage="batched", device="cpu", size="tiny", duration_s=1.0,
                                      warmup_s=0.3, workers=2, concurrency=3000, queue_timeout_ms=50.0))
    assert result.requests > 0 and result.p50_ms is not None and result.p99_ms is not None
    assert result.p50_ms < 50.0 + 150.0  # the timeout plus one batch, generously
    unbounded_ms = 3000 / result.req_per_s * 1000  # Little's law: the mean wait if nothing were shed
    assert result.p99_ms < unbounded_ms / 2, (result.p99_ms, unbounded_ms)  # spikes: a busy host deschedules us
    assert result.shed > 0 and result.dropped_pct is not None and result.dropped_pct > 0
