"""Where a running daemon's RSS goes, without a GPU: a real ``gpuwatch daemon`` at 1 s on the fake NVML over
real stand-in GPU processes (as :mod:`benchmarks.daemon_cpu` starts it), scraped every 15 s, with
:mod:`benchmarks.memory_probe` installed in its process. At each checkpoint (seconds after start) its RSS is
read from /proc and the probe's report taken: RSS by mapping, glibc's arenas, CPython's arenas, threads,
what each long-lived part retains and, with ``--tracemalloc``, the traced bytes by module (tracing costs
memory of its own: compare RSS only between runs without it).

    PYTHONPATH=$PWD python3 benchmarks/daemon_memory.py --at 70 --at 600 [--baseline REF] [--tracemalloc]
    PYTHONPATH=$PWD python3 benchmarks/daemon_memory.py --real-nvml --at 70 --baseline REF   # on a GPU machine
    PYTHONPATH=$PWD python3 benchmarks/daemon_memory.py --ticks 10000 --ticks 100000          # the leak daemon

``--baseline REF`` runs a second daemon from ``git archive REF`` beside this tree's, over the same stand-ins.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import commands  # noqa: E402
from benchmarks.daemon_cpu import CHILD, STAND_IN, export_tree  # noqa: E402
from benchmarks.procs import Started, free_port, start, wait_http  # noqa: E402

#: The probe goes in before the CLI runs: its file is read from this checkout whatever tree the daemon runs.
PROBED_CHILD = ("import os, runpy\n"
                "_probe = runpy.run_path(os.environ['MEMPROBE_FILE'])\n"
                "_probe['install'](os.environ['MEMPROBE_REPORT'])\n" + CHILD)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


#: The daemon on the real NVML, or the leak benchmark's replaying daemon, with the probe.
PROBED_MAIN = ("import os, runpy, sys\n"
                 "sys.path.insert(0, sys.argv.pop(1))\n"
                 "_probe = runpy.run_path(os.environ['MEMPROBE_FILE'])\n"
                 "_probe['install'](os.environ['MEMPROBE_REPORT'])\n"
                 "from gpuwatch.cli.main import main\n"
                 "sys.exit(main())\n")


class ProbedDaemon:
    def __init__(self, name: str, tree: Path, pids: list[int], logdir: Path, tracemalloc: bool,
                 replay: Path | None = None, real_nvml: bool = False) -> None:
        self.name, self.port = name, free_port()
        state = Path(tempfile.mkdtemp(prefix=f"state-{name}-", dir=logdir))
        self.report = logdir / f"report-{name}"
        env = {**commands.isolated_env(name, logdir), "PYTHONPATH": "",
               "MEMPROBE_FILE": str(ROOT / "benchmarks" / "memory_probe.py"),
               "MEMPROBE_REPORT": str(self.report)}
        if tracemalloc:
            env["PYTHONTRACEMALLOC"] = "1"
        daemon = ["daemon", *commands.listen_args(self.port), "--state-dir", str(state)]
        if replay is not None:
            cmd = [sys.executable, "-c", PROBED_MAIN, str(tree), *daemon, "--replay", str(replay), "--speed", "0",
                   "--loop"]
        elif real_nvml:
            cmd = [sys.executable, "-c", PROBED_MAIN, str(tree), *daemon, "--interval", "1"]
            env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # the carried wheels, where there are any
        else:
            cmd = [sys.executable, "-c", PROBED_CHILD, str(tree), str(ROOT / "tests"), ",".join(map(str, pids)),
                   "40", *daemon, "--interval", "1"]
        self.proc: Started = start(name, cmd, logdir, env=env)
        self.url = f"http://127.0.0.1:{self.port}"
        self.taken = 0

    def scrape(self) -> None:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as resp:
            resp.read()

    def take(self) -> dict[str, Any]:
        rss = _rss_kib(self.proc.pid)
        self.taken += 1
        path = Path(f"{self.report}-{self.taken}.json")
        os.kill(self.proc.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists():
                time.sleep(0.5)  # written whole by then (a large report takes a moment)
                try:
                    return {"rss_mib_outside": round(rss / 1024, 2), **json.loads(path.read_text())}
                except ValueError:
                    continue
            time.sleep(0.2)
        return {"rss_mib_outside": round(rss / 1024, 2), "error": "no report"}


def run(args: argparse.Namespace) -> dict[str, Any]:
    logdir = Path(tempfile.mkdtemp(prefix="gpuwatch-daemon-memory-"))
    if args.real_nvml:  # the H200 benchmark's load: torch processes on the GPU
        from benchmarks.gpu_load import start_load, wait_on_gpu

        stand_ins = start_load(args.procs, logdir, seconds=max(args.at) + 300)
        pids = wait_on_gpu(stand_ins)
    else:
        stand_ins = [start(f"stand-in-{i}", [sys.executable, "-c", STAND_IN], logdir) for i in range(args.procs)]
        pids = [s.pid for s in stand_ins]
    trees = {"this tree": ROOT}
    if args.baseline:
        trees = {f"baseline {args.baseline}": export_tree(args.baseline, logdir / "baseline"), **trees}
    daemons = {label: ProbedDaemon(f"daemon-{i}", tree, pids, logdir, args.tracemalloc, real_nvml=args.real_nvml)
               for i, (label, tree) in enumerate(trees.items())}
    t0 = time.monotonic()
    out: dict[str, Any] = {"logs": str(logdir), "tracemalloc": args.tracemalloc, "checkpoints": {}}
    stop = threading.Event()
    try:
        for d in daemons.values():
            wait_http(d.url + "/healthz", 90, d.proc)

        def scraper() -> None:
            while not stop.wait(15.0):
                for d in daemons.values():
                    try:
                        d.scrape()
                    except OSError:
                        pass

        threading.Thread(target=scraper, daemon=True).start()
        curve: dict[str, list[tuple[float, float]]] = {label: [] for label in daemons}
        for at in sorted(args.at):
            while (left := at - (time.monotonic() - t0)) > 0:
                time.sleep(min(10.0, left))
                for label, d in daemons.items():
                    curve[label].append((round(time.monotonic() - t0), round(_rss_kib(d.proc.pid) / 1024, 2)))
            out["checkpoints"][str(at)] = {label: d.take() for label, d in daemons.items()}
        out["rss_curve_mib"] = curve
    finally:
        stop.set()
        for d in daemons.values():
            d.proc.stop()
        for s in stand_ins:
            s.stop()
    return out


def _seq(url: str) -> int:
    with urllib.request.urlopen(url + "/api/v1/snapshot", timeout=10) as resp:
        return int(json.loads(resp.read()).get("seq", 0))


def run_leak(args: argparse.Namespace) -> dict[str, Any]:
    """The leak benchmark's replaying daemon (:mod:`benchmarks.leaks`), reported at each tick of ``--ticks``."""
    from benchmarks.recordings import make_leak_recording

    logdir = Path(tempfile.mkdtemp(prefix="gpuwatch-leak-memory-"))
    recording = logdir / "leak.ndjson.gz"
    make_leak_recording(recording)
    tree = export_tree(args.baseline, logdir / "baseline") if args.baseline else ROOT
    d = ProbedDaemon("leak", tree, [], logdir, args.tracemalloc, replay=recording)
    out: dict[str, Any] = {"logs": str(logdir), "tracemalloc": args.tracemalloc, "tree": args.baseline or "this tree",
                           "checkpoints": {}}
    try:
        wait_http(d.url + "/healthz", 90, d.proc)
        for target in sorted(args.ticks):
            while (seq := _seq(d.url)) < target:
                time.sleep(0.1)
            out["checkpoints"][str(target)] = {"leak": {"seq": seq, **d.take()}}
    finally:
        d.proc.stop()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--at", type=float, action="append", help="seconds after start to report at (default 70)")
    p.add_argument("--procs", type=int, default=4, help="stand-in GPU processes (default 4, the H200 load's)")
    p.add_argument("--baseline", metavar="REF", help="a git ref to run beside this tree")
    p.add_argument("--real-nvml", action="store_true", help="on a GPU machine: the real NVML and --procs torch "
                   "load processes (benchmarks/load_worker.py) instead of the fake and the stand-ins")
    p.add_argument("--tracemalloc", action="store_true", help="trace allocations (costs memory of its own)")
    p.add_argument("--ticks", type=int, action="append", help="instead: the leak benchmark's replaying daemon, "
                   "reported when it reaches each of these ticks")
    p.add_argument("--light", action="store_true", help="report only what costs little memory to read (RSS, "
                   "arenas, objects by type): for a series of reports on one daemon")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args()
    if args.light:
        os.environ["MEMPROBE_LIGHT"] = "1"  # the daemons inherit it
    args.at = args.at or [70.0]
    text = json.dumps(run_leak(args) if args.ticks else run(args), indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
