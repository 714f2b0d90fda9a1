"""The alert worker takes snapshots two at a time at a live pace, yet evaluates every one, in order, and what
came last soon after a stream ends (a few of its intervals), not at the next tick that never comes."""

from __future__ import annotations

import asyncio
import time

from alerts.build import engine_for, gpu, snap

from gpuwatch.daemon.pipeline import Pipeline
from gpuwatch.daemon.stream import StreamHub


def test_every_snapshot_is_evaluated_in_order_and_the_last_soon_after_the_stream_ends() -> None:
    engine = engine_for('{threshold: {metric: gpu.util, op: "<", value: 30}}')
    seen: list[float] = []
    evaluate = engine.evaluate
    engine.evaluate = lambda s: (seen.append(s.time), evaluate(s))[1]  # type: ignore[method-assign]
    loop = asyncio.new_event_loop()
    pipeline = Pipeline(engine, StreamHub(4))
    pipeline.start(loop)
    try:
        snaps = [snap(i * 0.05, [gpu(util=10.0 if i % 7 else 90.0)]) for i in range(41)]
        for s in snaps:
            pipeline.offer(s)
            time.sleep(0.05)
        deadline = time.monotonic() + 2.0  # 2.5 intervals of 0.05 s would do: no tick-long wait at the end
        while pipeline.evaluated < len(snaps):
            assert time.monotonic() < deadline, f"{pipeline.evaluated} of {len(snaps)} evaluated"
            time.sleep(0.005)
        assert seen == [s.time for s in snaps]
        assert pipeline.skipped == 0 and pipeline.evaluation_failures == 0
        assert [a.state for a in pipeline.alerts] == ["firing"]  # the last snapshot's util 10: it holds
    finally:
        pipeline.close()
        loop.close()
