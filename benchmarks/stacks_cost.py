"""What the doctor's evidence costs: CPU (percent of one core) of a 1 s sampler over a real busy Python process,
with stacks off, at the daemon's pace (one py-spy window per process every 15 s) and at the doctor's (windows
back to back), and what following the wait to the process's feeders adds to the host source's tick.

The watched process is a real one: a thread tokenising in Python fills a queue that the main thread drains,
and a child process it feeds through a pipe spins on a core, so the GPU process waits (its feeders are
followed) and every window samples two busy threads. A stand-in GPU source names it on an under-used GPU
(no NVIDIA driver needed); the host source, the stack source and py-spy are the real ones. The CPU counted is
this process's (the sampler) and its reaped children's (py-spy), over the window.

    python benchmarks/stacks_cost.py                  # 60 s per mode
    python benchmarks/stacks_cost.py --seconds 20
    python benchmarks/stacks_cost.py --pid 4242       # a process already running (a torch job on a GPU host:
                                                      # its native symbols are what py-spy pays for)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gpuwatch.model.process_sample import ProcessSample  # noqa: E402
from gpuwatch.model.snapshot import GpuSample  # noqa: E402
from gpuwatch.sampler.collector import LiveCollector  # noqa: E402
from gpuwatch.sources.base import Reading, Source  # noqa: E402
from gpuwatch.sources.host import HostSource  # noqa: E402
from gpuwatch.sources.procfs import read_children  # noqa: E402
from gpuwatch.sources.stack_source import DOCTOR_EVERY_S, EVERY_S, StackSource  # noqa: E402

WORKLOAD = """
import multiprocessing as mp, os, queue, threading
def tokenise(q):
    while True:
        q.put([hash(w) for w in ("the quick brown fox " * 500).split()])
def spin(w):
    while True:
        os.write(w, bytes([sum(i * i for i in range(100000)) % 256]))
if __name__ == '__main__':
    r, w = os.pipe()
    mp.Process(target=spin, args=(w,), daemon=True).start()
    q = queue.Queue(maxsize=8)
    threading.Thread(target=tokenise, args=(q,), daemon=True).start()
    print('ready', flush=True)
    while True:
        q.get()
        os.read(r, 1)
"""


class OneGpu(Source):
    """A GPU source that names one process on one under-used GPU."""

    name = "gpu"

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        return Reading(gpus=(GpuSample(0, "GPU-bench", gpu_util=20.0),), processes=(ProcessSample(self.pid, 0),))


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(pid: int, stacks: StackSource | None, feeders: bool, seconds: float) -> dict[str, float]:
    host = HostSource()
    if not feeders:
        host._feeders.poll = lambda now, details: ([], {})  # type: ignore[method-assign]
    collector = LiveCollector([OneGpu(pid), host], stacks=stacks)
    for _ in range(3):  # warm up: first reads, imports
        collector.collect()
        time.sleep(1.0)
    start_cpu, start = cpu_seconds(), time.monotonic()
    ticks = windows = 0
    host_s = 0.0
    while time.monotonic() - start < seconds:
        snap = collector.collect()
        host_s += collector.timings()["host"][0]
        windows += len(snap.stacks)
        ticks += 1
        time.sleep(max(0.0, start + ticks - time.monotonic()))
    if stacks is not None:  # the last window's py-spy is reaped (and counted) before the meter stops
        deadline = time.monotonic() + 10
        while stacks._busy.is_set() and time.monotonic() < deadline:
            time.sleep(0.1)
    used = cpu_seconds() - start_cpu
    span = time.monotonic() - start
    collector.close()
    return {"cpu_percent": round(100 * used / span, 2), "ticks": ticks, "windows": windows,
            "host_ms_per_tick": round(1000 * host_s / max(1, ticks), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--pid", type=int, help="watch this running process instead of the built-in workload")
    args = ap.parse_args()
    proc = None if args.pid else subprocess.Popen([sys.executable, "-c", WORKLOAD], stdout=subprocess.PIPE, text=True)
    pid = args.pid or proc.pid  # type: ignore[union-attr]
    try:
        assert proc is None or (proc.stdout is not None and proc.stdout.readline().strip() == "ready")
        modes = {
            "stacks off, feeders off": (None, False),
            "stacks off, feeders on": (None, True),
            f"stacks every {EVERY_S:g} s (daemon, dashboard)": (StackSource(every_s=EVERY_S), True),
            f"stacks every {DOCTOR_EVERY_S:g} s (doctor, back to back)": (StackSource(every_s=DOCTOR_EVERY_S), True),
        }
        results = {}
        for name, (stacks, feeders) in modes.items():
            if stacks is not None and stacks.exe is None:
                print(f"{name}: skipped, py-spy is not installed", file=sys.stderr)
                continue
            results[name] = measure(pid, stacks, feeders, args.seconds)
            if stacks is not None:
                results[name]["pyspy_cpu_s_per_window"] = round(stacks.cpu_s / max(1, stacks.windows), 3)
            print(f"{name:<48} {results[name]}", flush=True)
    finally:
        if proc is not None:
            for child in read_children(proc.pid):
                os.kill(child, signal.SIGKILL)
            proc.kill()
            proc.wait()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
