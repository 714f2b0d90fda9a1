"""The NVML source's own Python per tick, on the fake NVML: a bare loop of ``NvmlSource.poll`` at a simulated
1 s interval, minus the fake's calls replayed bare.

The loop moves a hand clock 1 s per poll, so every cadence (slow getters, per-process utilisation, GPM's
anchor, the rarely-changing values) comes round as it does in a daemon at 1 s, without waiting for it. Every
NVML call of the loop is recorded (``raw_floor.TracingNvml``) and replayed bare; what the loop costs above
that replay is our own Python around the calls: getters, conversions, building the GpuSample and the
ProcessSamples. Also reported: NVML calls per tick, the number that costs on a real driver (each pynvml
call is ~1 µs of wrapper plus its native time), and the health worker's CPU per wall second with the fake's
event wait blocking as long as asked, as NVML's does.

    PYTHONPATH=$PWD:$PWD/tests python3 benchmarks/nvml_poll.py --ticks 3000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT / "tests", ROOT):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from benchmarks.raw_floor import TracingNvml, nvml_floor  # noqa: E402


def _fake(procs: int) -> Any:
    from fakes.fake_pynvml import make_fake_nvml

    fake = make_fake_nvml(gpus=1, processes_per_gpu=procs)
    fake.event_wait_cap_s = 3600.0  # block as long as asked, as NVML's event wait does
    return fake


def poll_cost(ticks: int, procs: int) -> dict[str, Any]:
    """Mean µs per poll (best of three passes), the bare replay of its calls, and calls per tick."""
    from fakes.fake_pynvml import FakeClock

    from gpuwatch.sources.nvml import NvmlSource

    fake = _fake(procs)
    tracer = TracingNvml(fake)
    clock = FakeClock()
    traced = NvmlSource(nvml=tracer, clock=clock, health_interval=0)  # records the calls
    for _ in range(40):  # past the first reads of every cadence
        traced.poll(clock.advance(1.0), [])
    tracer.calls = []
    tracer.recording = True
    for _ in range(ticks):
        traced.poll(clock.advance(1.0), [])
    tracer.recording = False
    calls = list(tracer.calls)
    traced.close()
    plain_clock = FakeClock()
    source = NvmlSource(nvml=fake, clock=plain_clock, health_interval=0)  # timed: no tracing around calls
    for _ in range(40):
        source.poll(plain_clock.advance(1.0), [])
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(ticks):
            source.poll(plain_clock.advance(1.0), [])
        best = min(best, time.process_time() - t0)
    source.close()
    floor = nvml_floor(calls, fake.NVMLError)
    best_floor = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        floor()
        best_floor = min(best_floor, time.process_time() - t0)
    per_tick = {name: round(n / ticks, 3) for name, n in sorted(Counter(c[0] for c in calls).items())}
    return {"poll_us": round(1e6 * best / ticks, 1), "fake_calls_us": round(1e6 * best_floor / ticks, 1),
            "own_python_us": round(1e6 * (best - best_floor) / ticks, 1),
            "nvml_calls_per_tick": round(len(calls) / ticks, 2), "calls_per_tick": per_tick}


def health_cost(seconds: float, procs: int) -> dict[str, Any]:
    """The health worker thread's CPU per wall second (ms/s), from its own thread's CPU clock."""
    import threading

    from gpuwatch.sources.nvml import NvmlSource

    fake = _fake(procs)
    source = NvmlSource(nvml=fake, slow_interval=0)
    worker = source.health
    assert worker is not None and worker._thread is not None
    tid = worker._thread.native_id
    assert tid is not None

    def thread_cpu_s() -> float:
        with open(f"/proc/self/task/{tid}/schedstat") as fh:
            return int(fh.read().split()[0]) / 1e9

    c0, t0 = thread_cpu_s(), time.monotonic()
    threading.Event().wait(seconds)
    c1, t1 = thread_cpu_s(), time.monotonic()
    calls = dict(fake.calls)
    source.close()
    return {"health_ms_per_s": round(1e3 * (c1 - c0) / (t1 - t0), 4),
            "event_waits_per_s": round(calls.get("nvmlEventSetWait_v2", 0) / (t1 - t0), 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ticks", type=int, default=3000, help="simulated 1 s ticks per pass (default 3000)")
    p.add_argument("--procs", type=int, default=4, help="compute processes on the fake GPU (default 4)")
    p.add_argument("--health-seconds", type=float, default=30.0, help="wall seconds the health worker is "
                   "measured over (default 30; 0 skips it)")
    args = p.parse_args()
    out = poll_cost(args.ticks, args.procs)
    if args.health_seconds > 0:
        out.update(health_cost(args.health_seconds, args.procs))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
