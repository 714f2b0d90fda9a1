"""The daemon's standing cost at a 1 s interval, without a GPU: CPU seconds per wall second, and where they go.

A real ``gpuwatch daemon`` runs on the fake NVML (``tests/fakes``, installed as ``pynvml`` in the daemon's
own process) whose GPU processes are real local processes (stand-ins with a feeding thread that works in
short bursts and threads that sleep), so the host source, the feeder search, the stack sampler (py-spy,
where ptrace is permitted), the alert rules, the shared doctor, the GPU-hour accounting and the rollout
detector all run as on a GPU machine. What it does not exercise: the NVML driver's own cost (the fake's
calls are Python functions, counted apart as ``fake NVML``) and the XID event wait (the fake has no events).

To compare two versions, ``--baseline REF`` runs a second daemon from ``git archive REF`` beside this
tree's, over the same stand-ins, measured in the same window: on a shared machine only that ratio is
repeatable, not the absolute numbers. CPU comes from /proc: ``cpu_pct`` from the process's stat (utime +
stime, what psutil and the H200 benchmark read: sampled at the timer tick) and ``cpu_pct_exact`` from each
thread's schedstat (nanoseconds on a CPU; threads that ended inside the window are not in it). Each daemon
is scraped every 15 s, as the H200 benchmark's window does. ``--profile`` adds a py-spy (``record
--format raw --nonblocking``) of each daemon, summarised by part (which thread's work) and by gpuwatch
module (the innermost gpuwatch frame of each working sample).

    PYTHONPATH=$PWD python3 benchmarks/daemon_cpu.py --baseline HEAD~3 --seconds 120 --profile
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import commands, profiling  # noqa: E402
from benchmarks.procs import Started, free_port, start, wait_http  # noqa: E402

#: A stand-in GPU process: its main thread feeds in bursts (2 ms of CPU every 40 ms), six threads sleep.
STAND_IN = """\
import threading, time
for _ in range(6):
    threading.Thread(target=time.sleep, args=(86400,), daemon=True).start()
while True:
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
    time.sleep(0.038)
"""

#: A stand-in shaped like the H200 load (``load_worker.py``): launches for 0.2 ms, waits about 1 ms in a futex
#: (where a blocking CUDA synchronise waits), sleeps 10 ms.
STAND_IN_SYNC = """\
import threading, time
held = threading.Lock()
held.acquire()
for _ in range(6):
    threading.Thread(target=time.sleep, args=(86400,), daemon=True).start()
while True:
    end = time.perf_counter() + 0.0002
    while time.perf_counter() < end:
        pass
    held.acquire(timeout=0.001)
    time.sleep(0.01)
"""

#: A sibling of the GPU processes, as the H200 window's other measured programs are: a process holding a
#: listening socket and threads that sleep, that wakes every second for 2 ms of work.
SIBLING = """\
import socket, threading, time
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
for _ in range(4):
    threading.Thread(target=time.sleep, args=(86400,), daemon=True).start()
while True:
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
    time.sleep(1.0)
"""

#: Run in the daemon's process: the fake NVML as ``pynvml``, its processes the stand-ins, then the CLI.
CHILD = """\
import sys
tree, tests, pids, util = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path[:0] = [tree, tests]
sys.argv = [sys.argv[0], *sys.argv[5:]]
from fakes.fake_pynvml import make_fake_nvml
pids = [int(p) for p in pids.split(",")]
fake = make_fake_nvml(gpus=1, processes_per_gpu=len(pids))
fake.gpus[0].util_gpu = util
fake.event_wait_cap_s = 3600.0  # NVML's event wait blocks for the timeout asked; the fake's cap is for tests
for proc, pid in zip(fake.gpus[0].processes, pids):
    proc.pid = pid
sys.modules["pynvml"] = fake
from gpuwatch.cli.main import main
sys.exit(main())
"""

#: Run in the daemon's process on a GPU machine: ``tree``'s gpuwatch (first on the path), the real NVML.
REAL_CHILD = """\
import sys
sys.path.insert(0, sys.argv[1])
sys.argv = [sys.argv[0], *sys.argv[2:]]
from gpuwatch.cli.main import main
sys.exit(main())
"""

#: Parts of the daemon, by the first of these frames found in a working sample's stack (outermost first).
PARTS = (
    ("fake NVML", "fakes/fake_pynvml"),
    ("stack source (py-spy runner)", "StackSource"),
    ("nvml source", "NvmlSource."),
    ("nvml health worker", "HealthWorker."),
    ("host source", "HostSource."),
    ("rollouts", "RolloutDetector"),  # before the accounting: it rides the accounting's thread
    ("accounting", "Accounting._run"),
    ("shared doctor", "SharedDiagnosis."),
    ("alerts + notifier", "Pipeline._evaluate_loop"),
    ("outbox delivery", "Deliverer"),
    ("/metrics", "SnapshotCollector"),
    ("sampler plumbing", "Sampler."),
)


def part_of(frames: list[str]) -> str:
    for name, mark in PARTS:
        if any(mark in f for f in frames):
            return name
    return "event loop, HTTP, other"


def module_of(frames: list[str]) -> str:
    """The innermost gpuwatch frame's module (``sources.host``); samples under no gpuwatch frame: other."""
    for f in reversed(frames):
        where = f.rsplit(" (", 1)[1] if " (" in f else ""
        path = "/" + where.rsplit(":", 1)[0]
        if "/fakes/" in path:
            return "fake NVML"
        if "/gpuwatch/" in path:
            return path.rsplit("/gpuwatch/", 1)[1].removesuffix(".py").replace("/", ".")
    return "(no gpuwatch frame)"


#: Leaves that wait, beyond those :mod:`benchmarks.profiling` knows: the stack source's timed wait.
MORE_IDLE_LEAVES = ("StackSource._run (",)


def _idle(leaf: str) -> bool:
    return profiling._idle(leaf) or any(mark in leaf for mark in MORE_IDLE_LEAVES)


def breakdown(raw: Path) -> dict[str, Any]:
    """Working samples of a py-spy raw file by part and by gpuwatch module (waits left out)."""
    parts: Counter[str] = Counter()
    modules: Counter[str] = Counter()
    total = 0
    for frames, n in profiling.collapsed_stacks(raw):
        if not frames or _idle(profiling._short(frames[-1])):
            continue
        total += n
        parts[part_of(frames)] += n
        modules[module_of(frames)] += n
    return {"working_samples": total,
            "by_part": {k: round(100 * v / total, 1) for k, v in parts.most_common()} if total else {},
            "by_module": {k: round(100 * v / total, 1) for k, v in modules.most_common(20)} if total else {}}


def _ticks(path: Path) -> tuple[int, int]:
    """(utime + stime, cutime + cstime) clock ticks of one /proc stat file."""
    fields = path.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _run_ns(path: Path) -> int:
    """Nanoseconds on a CPU from a schedstat file: exact, where utime and stime are sampled at the timer tick
    (a thread that wakes briefly on a timer is charged whole ticks or none)."""
    return int(path.read_text().split()[0])


def _cpu(pid: int) -> tuple[float, float, dict[int, float], dict[int, float]]:
    """(own, reaped children's) CPU seconds of ``pid`` from its stat, and each of its threads' own: from the
    tick-sampled stat and from the exact schedstat."""
    tick = os.sysconf("SC_CLK_TCK")
    own, kids = _ticks(Path(f"/proc/{pid}/stat"))
    sampled, exact = {}, {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            sampled[int(task.name)] = _ticks(task / "stat")[0] / tick
            exact[int(task.name)] = _run_ns(task / "schedstat") / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return own / tick, kids / tick, sampled, exact


def thread_names(pid: int) -> dict[int, str]:
    """OS thread id -> Python thread name, from ``py-spy dump --json`` (empty without py-spy)."""
    exe = commands.py_spy()
    if exe is None:
        return {}
    done = subprocess.run([exe, "dump", "--pid", str(pid), "--json", "--nonblocking"], capture_output=True,
                          timeout=30, check=False)
    try:
        return {int(t["os_thread_id"]): str(t.get("thread_name") or t["os_thread_id"])
                for t in json.loads(done.stdout) if t.get("os_thread_id")}
    except (ValueError, KeyError, TypeError):
        return {}


def by_thread(before: dict[int, float], after: dict[int, float], names: dict[int, str], wall: float,
              pid: int) -> dict[str, float]:
    """ms of CPU per second of wall time for each thread (named; those that ended in the window: lost)."""
    rows: Counter[str] = Counter()
    for tid, cpu in after.items():
        name = names.get(tid) or ("MainThread" if tid == pid else f"thread {tid}")
        rows[name] += 1000 * (cpu - before.get(tid, 0.0)) / wall
    return {k: round(v, 2) for k, v in rows.most_common() if v > 0}


def timeline(daemons: list[Daemon], seconds: float, step: float = 5.0) -> dict[str, list[dict[str, float]]]:
    """Each daemon's CPU (own + reaped children's, ms per second) in ``step`` slices of the first ``seconds``
    after start: what a window opened soon after launch (the H200 benchmark's opens after 10 s) also pays."""
    rows: dict[str, list[dict[str, float]]] = {d.name: [] for d in daemons}
    last = {d.name: _cpu(d.proc.pid)[:2] for d in daemons}
    t0 = time.monotonic()
    while (left := seconds - (time.monotonic() - t0)) > 0:
        time.sleep(min(step, left))
        for d in daemons:
            own, kids = _cpu(d.proc.pid)[:2]
            rows[d.name].append({"t": round(time.monotonic() - t0, 1),
                                 "own_ms_per_s": round(1000 * (own - last[d.name][0]) / step, 2),
                                 "children_ms_per_s": round(1000 * (kids - last[d.name][1]) / step, 2)})
            last[d.name] = (own, kids)
    return rows


def export_tree(ref: str, into: Path) -> Path:
    """``git archive ref`` unpacked under ``into``: the version to compare against."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True, timeout=60)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True, timeout=60)
    return into


def spy(pid: int, seconds: float, raw: Path, rate: int) -> subprocess.Popen[bytes] | None:
    """py-spy on ``pid`` with idle samples kept (its own idle test drops most of a daemon's short bursts on a
    busy machine); :func:`breakdown` leaves out the samples whose leaf is a known wait instead."""
    exe = commands.py_spy()
    if exe is None:
        return None
    return subprocess.Popen([exe, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", str(rate),
                             "--nonblocking", "--idle", "--threads", "--format", "raw", "--output", str(raw)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _real_env(tree: Path) -> dict[str, str]:
    """PYTHONPATH for a daemon on the real NVML: ``tree`` first, then what this process was given (the carried
    wheels) without this checkout."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
    return {"PYTHONPATH": os.pathsep.join([str(tree), *rest])}


class Daemon:
    def __init__(self, name: str, tree: Path, pids: list[int], util: int, interval: float, logdir: Path,
                 real_nvml: bool = False) -> None:
        self.name, self.port = name, free_port()
        self.state = Path(tempfile.mkdtemp(prefix=f"state-{name}-", dir=logdir))
        daemon = ["daemon", *commands.listen_args(self.port), "--state-dir", str(self.state),
                  "--interval", f"{interval:g}"]
        if real_nvml:  # not ``-m gpuwatch``: that would put the working directory's gpuwatch first on the path
            cmd = [sys.executable, "-c", REAL_CHILD, str(tree), *daemon]
            env = {**commands.isolated_env(name, logdir), **_real_env(tree)}
        else:
            cmd = [sys.executable, "-c", CHILD, str(tree), str(ROOT / "tests"), ",".join(map(str, pids)), str(util),
                   *daemon]
            env = {**commands.isolated_env(name, logdir), "PYTHONPATH": ""}
        self.proc: Started = start(name, cmd, logdir, env=env)
        self.url = f"http://127.0.0.1:{self.port}"
        self.scrapes = 0

    def ready(self) -> None:
        wait_http(self.url + "/healthz", 90, self.proc)

    def scrape(self) -> None:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as resp:
            resp.read()
        self.scrapes += 1


class Exporter(Daemon):
    """nvitop-exporter at the same interval, the anchor, metered and scraped like the daemons."""

    def __init__(self, interval: float, logdir: Path) -> None:  # no super(): another command
        self.name, self.port = "nvitop-exporter", free_port()
        self.proc = start(self.name, commands.nvitop_exporter(self.port, interval), logdir)
        self.url = f"http://127.0.0.1:{self.port}"
        self.scrapes = 0

    def ready(self) -> None:
        wait_http(self.url + "/metrics", 90, self.proc)


def run(args: argparse.Namespace) -> dict[str, Any]:
    logdir = Path(tempfile.mkdtemp(prefix="gpuwatch-daemon-cpu-"))
    out = Path(args.out) if args.out else logdir
    out.mkdir(parents=True, exist_ok=True)
    if args.real_nvml:
        from benchmarks.gpu_load import start_load, wait_on_gpu
        stand_ins = start_load(args.procs, logdir, seconds=args.warmup + args.seconds + 300)
        pids = wait_on_gpu(stand_ins)
    else:
        code = STAND_IN_SYNC if args.stand_in == "sync" else STAND_IN
        stand_ins = [start(f"stand-in-{i}", [sys.executable, "-c", code], logdir) for i in range(args.procs)]
        pids = [s.pid for s in stand_ins]
    stand_ins += [start(f"sibling-{i}", [sys.executable, "-c", SIBLING], logdir) for i in range(args.siblings)]
    trees = {"this tree": ROOT} if not args.new else {args.new: export_tree(args.new, logdir / "new")}
    if args.baseline:
        base = Path(args.baseline)  # a folder holding an unpacked tree (where there is no git history), or a ref
        tree = base.resolve() if base.is_dir() else export_tree(args.baseline, logdir / "baseline")
        trees = {f"baseline {args.baseline}": tree, **trees}
    daemons = [Daemon(f"daemon-{i}", tree, pids, args.util, args.interval, logdir, args.real_nvml)
               for i, tree in enumerate(trees.values())]
    if args.anchor:
        trees = {**trees, "nvitop-exporter": ROOT}
        daemons.append(Exporter(args.interval, logdir))
    result: dict[str, Any] = {"seconds": args.seconds, "warmup_s": args.warmup, "interval_s": args.interval,
                              "stand_ins": args.procs, "stand_in": args.stand_in, "siblings": args.siblings,
                              "gpu_util": args.util, "logs": str(logdir)}
    try:
        for d in daemons:
            d.ready()
        result["warmup_timeline"] = timeline(daemons, args.warmup)
        stop = threading.Event()

        def scraper() -> None:
            while True:
                for d in daemons:
                    try:
                        d.scrape()
                    except OSError:
                        pass
                if stop.wait(15.0):
                    return

        spies = {d.name: spy(d.proc.pid, args.seconds, out / f"pyspy-{d.name}.raw", args.rate) for d in daemons} \
            if args.profile else {}
        before = {d.name: _cpu(d.proc.pid) for d in daemons}
        t0 = time.monotonic()
        thread = threading.Thread(target=scraper, daemon=True)
        thread.start()
        time.sleep(args.seconds)
        wall = time.monotonic() - t0
        after = {d.name: _cpu(d.proc.pid) for d in daemons}
        stop.set()
        names = {d.name: thread_names(d.proc.pid) for d in daemons}
        rows: dict[str, Any] = {}
        for (label, _), d in zip(trees.items(), daemons, strict=True):
            own = after[d.name][0] - before[d.name][0]
            kids = after[d.name][1] - before[d.name][1]
            exact = by_thread(before[d.name][3], after[d.name][3], names[d.name], wall, d.proc.pid)
            row: dict[str, Any] = {
                "cpu_pct": round(100 * own / wall, 3), "children_cpu_pct": round(100 * kids / wall, 3),
                "cpu_pct_exact": round(sum(exact.values()) / 10, 3), "scrapes": d.scrapes,
                "ms_per_s_by_thread_exact": exact,
                "ms_per_s_by_thread": by_thread(before[d.name][2], after[d.name][2], names[d.name], wall, d.proc.pid)}
            if d.name in spies:
                failed = profiling.finish_py_spy(spies[d.name], timeout_s=args.seconds + 30)
                raw = out / f"pyspy-{d.name}.raw"
                row["profile"] = {"error": failed} if failed else breakdown(raw)
            rows[label] = row
        result["daemons"] = rows
        ours = [r for label, r in rows.items() if label != "nvitop-exporter"]
        if len(ours) == 2:
            for field in ("cpu_pct", "cpu_pct_exact"):
                base, new = (r[field] for r in ours)
                result[f"ratio_new_to_baseline_{field}"] = round(new / base, 3) if base else None
        if "nvitop-exporter" in rows:
            anchor = rows["nvitop-exporter"]
            for label, r in rows.items():
                if label != "nvitop-exporter" and anchor["cpu_pct_exact"]:
                    r["cpu_exact_over_anchor"] = round(r["cpu_pct_exact"] / anchor["cpu_pct_exact"], 3)
                    r["cpu_over_anchor"] = round((r["cpu_pct"] + r["children_cpu_pct"])
                                                 / max(anchor["cpu_pct"] + anchor["children_cpu_pct"], 1e-9), 3)
    finally:
        for d in daemons:
            d.proc.stop()
        for s in stand_ins:
            s.stop()
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=120.0, help="the measured window (default 120)")
    p.add_argument("--warmup", type=float, default=45.0, help="seconds before it, so the doctor's windows fill")
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--procs", type=int, default=4, help="stand-in GPU processes (default 4, the H200 load's)")
    p.add_argument("--stand-in", choices=("burst", "sync"), default="burst",
                   help="the stand-ins' shape: burst (a feeding thread that works 2 ms every 40 ms) or sync (the "
                        "H200 load's: short launches, a futex wait like a blocking CUDA synchronise, 10 ms sleeps)")
    p.add_argument("--siblings", type=int, default=0, help="other processes started beside the GPU processes (the "
                   "H200 benchmark window starts about a dozen: the other measured programs)")
    p.add_argument("--util", type=int, default=40, help="the fake GPU's utilisation, percent")
    p.add_argument("--baseline", metavar="REF", help="a git ref (or a folder with a tree unpacked) to run beside "
                   "this tree, in the same window")
    p.add_argument("--new", metavar="REF", help="run this git ref instead of the working tree (edits made while "
                   "it runs then change nothing)")
    p.add_argument("--real-nvml", action="store_true", help="on a GPU machine: the real NVML and --procs torch "
                   "load processes (benchmarks/load_worker.py) instead of the fake and the stand-ins")
    p.add_argument("--anchor", action="store_true", help="nvitop-exporter beside the daemons, in the same window")
    p.add_argument("--profile", action="store_true", help="py-spy each daemon and break its samples down")
    p.add_argument("--rate", type=int, default=200, help="py-spy samples per second (default 200)")
    p.add_argument("--out", help="where the py-spy files go (default: the log folder)")
    result = run(p.parse_args())
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
