"""The host source's poll, bare: its CPU per poll at 1 s over real local processes shaped like a GPU load.

A launcher starts ``--procs`` processes the host source is told are on a GPU, each shaped like a torch
training process: ``--threads`` threads that sleep (40: the pools a torch process starts), a main thread
that works in short bursts between timer sleeps (as the H200 load's, which waits on the GPU between
bursts), and ``--workers`` data-loader-like children (2) that work a little every 100 ms. The host source
polls them every second, as the daemon's host thread does; each poll's thread CPU (``time.thread_time``)
is recorded.

``--baseline REF`` polls with ``git archive REF``'s host source too, in a second process over the same
processes and in the same window: on a shared machine only that ratio is repeatable.

    PYTHONPATH=$PWD python3 benchmarks/host_cost.py --seconds 60 --baseline HEAD~1

Prints one JSON line per tree: median and mean CPU per poll (ms), p90, and the share of a core.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: A GPU process's stand-in: 40 sleeping pool threads, two worker children, a main thread in bursts.
GPU_PROC = """
import subprocess, sys, threading, time
for _ in range(int(sys.argv[1])):
    threading.Thread(target=time.sleep, args=(86400,), daemon=True).start()
worker = ("import time\\nwhile True:\\n    end = time.perf_counter() + 0.001\\n"
          "    while time.perf_counter() < end: pass\\n    time.sleep(0.1)")
kids = [subprocess.Popen([sys.executable, '-c', worker]) for _ in range(int(sys.argv[2]))]
while True:
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
    time.sleep(0.038)
"""
LAUNCHER = """
import subprocess, sys, time
procs = [subprocess.Popen([sys.executable, '-c', sys.argv[1], *sys.argv[3:]]) for _ in range(int(sys.argv[2]))]
print(' '.join(str(p.pid) for p in procs), flush=True)
time.sleep(3600)
"""
#: Run in each poller's process: import the host source from the tree given, poll, print the costs.
POLLER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from gpuwatch.sources.host import HostSource
pids, seconds = [int(p) for p in sys.argv[2].split(',')], float(sys.argv[3])
source, costs = HostSource(), []
start = time.monotonic()
source.poll(0.0, pids)
n = 0
while time.monotonic() - start < seconds:
    n += 1
    time.sleep(max(0.0, start + n - time.monotonic()))
    cpu = time.thread_time()
    source.poll(0.0, pids)
    costs.append(time.thread_time() - cpu)
print(json.dumps(costs), flush=True)
"""


def _summary(name: str, costs: list[float]) -> dict[str, float | int | str]:
    ms = sorted(1000 * c for c in costs)
    return {"tree": name, "polls": len(ms), "median_ms": round(statistics.median(ms), 3),
            "mean_ms": round(statistics.fmean(ms), 3), "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 3),
            "cpu_ms_per_s": round(sum(ms) / max(1, len(ms)), 3)}


def measure(seconds: float, procs: int, baseline: str | None, threads: int = 40,
            workers: int = 2) -> list[dict[str, float | int | str]]:
    trees = {"this tree": ROOT}
    tmp = None
    if baseline:
        tmp = tempfile.TemporaryDirectory(prefix="host-cost-")
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", baseline, "gpuwatch"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp.name], input=archive, check=True)
        trees[baseline] = Path(tmp.name)
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, GPU_PROC, str(procs), str(threads), str(workers)],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert launcher.stdout is not None
        pids = launcher.stdout.readline().split()
        time.sleep(2.0)  # the threads and workers start
        pollers = {name: subprocess.Popen([sys.executable, "-c", POLLER, str(tree), ",".join(pids), str(seconds)],
                                          stdout=subprocess.PIPE, text=True) for name, tree in trees.items()}
        return [_summary(name, json.loads(p.communicate()[0])) for name, p in pollers.items()]
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        if tmp is not None:
            tmp.cleanup()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--threads", type=int, default=40, help="sleeping threads per process (default 40)")
    p.add_argument("--workers", type=int, default=2, help="worker children per process (default 2)")
    p.add_argument("--baseline", metavar="REF", help="a git ref whose host source polls beside this tree's")
    args = p.parse_args()
    for line in measure(args.seconds, args.procs, args.baseline, args.threads, args.workers):
        print(json.dumps(line))


if __name__ == "__main__":
    main()
