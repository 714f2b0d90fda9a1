"""What following the wait costs the host source, without a GPU: a launcher starts 4 processes the host source is
told are on a GPU (their main thread sleeping in a timer, as the H200 load does, or blocked on a pipe) beside
6 siblings holding 60 files and 20 loopback TCP connections each, and the host source polls the 4 at 1 s.

    PYTHONPATH=. .venv/bin/python benchmarks/feeders_cost.py [--wait sleep|input] [--seconds 40]

Prints one JSON line: the polling thread's CPU per poll and as a share of a core, and the feeders found.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

GPU = {"sleep": "import time\nwhile True: time.sleep(0.01)", "input": "import os\nr, w = os.pipe()\nos.read(r, 1)"}
HOLDER = """
import socket, time
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(64)
keep = [open('/dev/null') for _ in range(60)]
conns = []
for _ in range(20):
    c = socket.create_connection(srv.getsockname()); conns += [c, srv.accept()[0]]
time.sleep(3600)
"""
LAUNCHER = """
import subprocess, sys, time
procs = [subprocess.Popen([sys.executable, '-c', sys.argv[1]]) for _ in range(4)]
procs += [subprocess.Popen([sys.executable, '-c', sys.argv[2]]) for _ in range(6)]
print(' '.join(str(p.pid) for p in procs[:4]), flush=True)
time.sleep(3600)
"""


def measure(wait: str, seconds: float) -> dict[str, float | int | str]:
    from gpuwatch.sources.host import HostSource
    from gpuwatch.sources.procfs import read_children

    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, GPU[wait], HOLDER], stdout=subprocess.PIPE,
                                text=True)
    try:
        assert launcher.stdout is not None
        gpus = [int(pid) for pid in launcher.stdout.readline().split()]
        time.sleep(2.0)  # the holders connect
        source = HostSource()
        cpu0, start, polls, feeders = time.thread_time(), time.monotonic(), 0, 0
        while time.monotonic() - start < seconds:
            feeders = len(source.poll(0.0, gpus).feeders)
            polls += 1
            time.sleep(max(0.0, start + polls - time.monotonic()))
        cpu, wall = time.thread_time() - cpu0, time.monotonic() - start
        return {"wait": wait, "polls": polls, "cpu_ms_per_poll": round(1000 * cpu / polls, 2),
                "cpu_pct": round(100 * cpu / wall, 3), "feeders": feeders}
    finally:
        for pid in read_children(launcher.pid):
            os.kill(pid, signal.SIGKILL)
        launcher.kill()
        launcher.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wait", choices=sorted(GPU), default="sleep")
    p.add_argument("--seconds", type=float, default=40.0)
    args = p.parse_args()
    print(json.dumps(measure(args.wait, args.seconds)))


if __name__ == "__main__":
    main()
