"""What one source's poll costs on the GPU machine, polled once a second as the daemon does, beside the benchmark
load (4 torch processes) and a dozen sibling programs: the CPU of each poll (``time.thread_time``: cold calls,
as a 1 s daemon makes them, cost several times what the same calls cost back to back) and where it goes
(cProfile, by own time).

    PYTHONPATH=. python3 benchmarks/source_profile.py nvml [--polls 60]   (the real NVML; the daemon's cadences)
    PYTHONPATH=. python3 benchmarks/source_profile.py host [--siblings 12]

Prints the poll's CPU (median, mean, p90, max in ms), then the top functions. Needs a GPU and torch.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.daemon_cpu import SIBLING  # noqa: E402
from benchmarks.gpu_load import start_load, stop_load, wait_on_gpu  # noqa: E402
from benchmarks.procs import Started, start  # noqa: E402


def _source(kind: str) -> Any:
    if kind == "nvml":  # at the daemon's cadences for the slow reads
        from gpuwatch.cli.daemon import DAEMON_PROCESS_UTIL_S
        from gpuwatch.runtime.build import SamplingOptions
        from gpuwatch.sources.nvml import NvmlSource

        return NvmlSource(slow_interval=SamplingOptions().slow_interval, process_util_period_s=DAEMON_PROCESS_UTIL_S)
    from gpuwatch.sources.host import HostSource

    return HostSource()


def profile(kind: str, polls: int, siblings: int, warmup: int = 10) -> str:
    logdir = Path(tempfile.mkdtemp(prefix="gpuwatch-source-profile-"))
    load = start_load(4, logdir, seconds=warmup + polls + 120)
    others: list[Started] = []
    try:
        pids = wait_on_gpu(load)
        others = [start(f"sibling-{i}", [sys.executable, "-c", SIBLING], logdir) for i in range(siblings)]
        source = _source(kind)
        for _ in range(warmup):
            source.poll(time.monotonic(), pids)
            time.sleep(1.0)
        prof, costs, waits = cProfile.Profile(), [], Counter[str]()
        for _ in range(polls):
            before = time.thread_time()
            prof.enable()
            reading = source.poll(time.monotonic(), pids)
            prof.disable()
            costs.append(1000 * (time.thread_time() - before))
            for d in reading.process_details.values():
                waits[(d.get("thread_waits") or ("-",))[0]] += 1
            time.sleep(1.0)
        if kind == "nvml":
            source.close()
    finally:
        for p in others:
            p.stop()
        stop_load(load)
    costs.sort()
    out = [f"{kind} source, {polls} polls at 1 s beside 4 torch processes and {siblings} siblings",
           f"poll CPU ms: median {statistics.median(costs):.3f}  mean {statistics.mean(costs):.3f}  "
           f"p90 {costs[int(0.9 * len(costs))]:.3f}  max {costs[-1]:.3f}"]
    if waits:
        out.append(f"busiest thread's wait, per process and poll: {dict(waits.most_common())}")
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    return "\n".join(out) + "\n" + text.getvalue()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", choices=("nvml", "host"))
    p.add_argument("--polls", type=int, default=60)
    p.add_argument("--siblings", type=int, default=12, help="sibling programs started beside the load")
    args = p.parse_args()
    print(profile(args.source, args.polls, args.siblings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
