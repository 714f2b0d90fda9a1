"""What the dashboard costs: CPU (percent of one core), RSS and bytes written to the terminal per second of
``gpuwatch tui`` in a pty of fixed size, beside an idle Textual app and, on a GPU machine, nvitop, all at
1 s refresh.

Each program runs alone, in turn, on a fresh 160x50 pty whose output a thread drains as a terminal would;
after a warm-up the CPU time of its process tree and the bytes it wrote are metered over the window. The
replay plays at the recording's speed, so values change every tick as they do on a live GPU.

    python benchmarks/tui_cost.py                      # here: idle Textual app vs gpuwatch tui --replay
    python benchmarks/tui_cost.py --live --nvitop --gpu-load 4   # on the GPU machine: live gpuwatch and
                                                                 # nvitop, 4 processes on the GPU as the
                                                                 # anchor measurement had
    python benchmarks/tui_cost.py --runs 3 --baseline /tmp/main   # this checkout beside another one
                                                                  # (git worktree add /tmp/main main)
    python benchmarks/tui_cost.py --runs 3 --baseline /tmp/main --together   # the two in one window, each
                                                                  # run (a shared machine's load falls on both)

Results print as a table; ``--json FILE`` (default ``$OUT/tui_cost.json`` when $OUT is set) keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests", ROOT / "tests" / "tui"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from benchmarks.procs import Meter, measure_window, start_in_pty  # noqa: E402

PY = sys.executable
REPLAY, LIVE, BASELINE = ("gpuwatch tui --replay (1 s)", "gpuwatch tui live (1 s)",
                          "baseline checkout --replay (1 s)")
NVITOP = "nvitop --interval 1"
IDLE_APP = ("from textual.app import App\nfrom textual.widgets import Static\n"
            "class Idle(App):\n    def compose(self):\n        yield Static('idle')\nIdle().run()\n")


def recording(path: str | None, tmp: Path) -> Path:
    """The recording to replay: the one given, the bundled H200 one, or a synthetic incident-shaped trace."""
    if path:
        return Path(path)
    from gpuwatch.data import bundled_recording

    if bundled_recording().exists():
        return bundled_recording()
    from synthetic import write_recording

    return write_recording(tmp / "synthetic.ndjson.gz", 600, gpus=1)


def programs(args: argparse.Namespace, rec: Path) -> list[tuple[str, list[str], Path | None]]:
    """(name, command, checkout to run it in) for each program to meter."""
    replay = [PY, "-m", "gpuwatch", "tui", "--replay", str(rec), "--loop", "--speed", "1", "--interval", "1"]
    progs: list[tuple[str, list[str], Path | None]] = [("idle Textual app", [PY, "-c", IDLE_APP], None)]
    if args.baseline:
        progs.append((BASELINE, replay, Path(args.baseline).resolve()))
    progs.append((REPLAY, replay, ROOT))
    if args.live:
        progs.append((LIVE, [PY, "-m", "gpuwatch", "tui", "--interval", "1"], ROOT))
    if args.nvitop:
        nvitop = shutil.which("nvitop")
        if nvitop is None:
            print("nvitop not found on PATH: skipped", file=sys.stderr)
        else:
            progs += [("nvitop", [nvitop], None), (NVITOP, [nvitop, "--interval", "1"], None)]
    return progs


def measure(name: str, cmd: list[str], cwd: Path | None, args: argparse.Namespace) -> dict[str, object]:
    proc = start_in_pty(name, cmd, cols=args.cols, rows=args.rows, env={"TEXTUAL_ANIMATIONS": "none"}, cwd=cwd)
    try:
        time.sleep(args.warmup)
        if not proc.alive():
            return {"program": name, "error": f"exited with {proc.popen.returncode} during warm-up"}
        meter = Meter(proc)
        measure_window([meter], args.seconds)
        return {"program": name, "command": " ".join(cmd), **({"cwd": str(cwd)} if cwd else {}), **meter.to_dict()}
    finally:
        proc.stop()


def measure_together(progs: list[tuple[str, list[str], Path | None]],
                     args: argparse.Namespace) -> list[dict[str, object]]:
    """Every program at once, each in its own pty, metered over the same window."""
    started = [(name, cmd, cwd, start_in_pty(name, cmd, cols=args.cols, rows=args.rows,
                                             env={"TEXTUAL_ANIMATIONS": "none"}, cwd=cwd))
               for name, cmd, cwd in progs]
    try:
        time.sleep(args.warmup)
        dead = {name for name, _, _, proc in started if not proc.alive()}
        meters = [(name, cmd, cwd, Meter(proc)) for name, cmd, cwd, proc in started if name not in dead]
        measure_window([m for _, _, _, m in meters], args.seconds)
        return [{"program": name, "error": "exited during warm-up"} for name in dead] + \
               [{"program": name, "command": " ".join(cmd), **({"cwd": str(cwd)} if cwd else {}), **m.to_dict()}
                for name, cmd, cwd, m in meters]
    finally:
        for *_, proc in started:
            proc.stop()


def table(results: list[dict[str, object]], reference: str | None) -> str:
    """One line per run; the last column compares CPU and terminal bytes with the reference's median."""
    ref_cpu, ref_bytes = median_of(results, reference, "cpu_pct"), median_of(results, reference, "tty_bytes_per_s")
    lines = [f"{'program':34} {'CPU % of a core':>16} {'tty B/s':>9} {'RSS MiB':>9} {'max RSS':>9}"
             f"   vs {reference or '-'} (CPU, bytes)"]
    for r in results:
        if r.get("error"):
            lines.append(f"{r['program']:34} error: {r['error']}")
            continue
        cpu, tty = float(r["cpu_pct"]), float(r.get("tty_bytes_per_s") or 0.0)  # type: ignore[arg-type]
        ratio = ""
        if ref_cpu and ref_bytes:
            ratio = f"{cpu / ref_cpu:.2f}x, {tty / ref_bytes:.2f}x"
        lines.append(f"{r['program']:34} {cpu:>16.2f} {tty:>9.0f} {r['rss_mib']:>9} {r['rss_max_mib']:>9}   {ratio}")
    return "\n".join(lines)


def median_of(results: list[dict[str, object]], program: str | None, key: str) -> float | None:
    values = [float(r[key]) for r in results  # type: ignore[arg-type]
              if r["program"] == program and r.get(key) is not None and not r.get("error")]
    return statistics.median(values) if values else None


def summary(results: list[dict[str, object]]) -> dict[str, float | None]:
    """The result keys run.py and report.py use, as medians over the runs: the live dashboard where it
    was measured, else the replay."""
    ours = LIVE if any(r["program"] == LIVE for r in results) else REPLAY
    out = {"tui_cpu_pct": median_of(results, ours, "cpu_pct"), "tui_rss_mib": median_of(results, ours, "rss_mib"),
           "tui_tty_bytes_per_s": median_of(results, ours, "tty_bytes_per_s")}
    if any(r["program"] == NVITOP for r in results):
        out |= {"nvitop_tui_cpu_pct": median_of(results, NVITOP, "cpu_pct"),
                "nvitop_tui_rss_mib": median_of(results, NVITOP, "rss_mib"),
                "nvitop_tty_bytes_per_s": median_of(results, NVITOP, "tty_bytes_per_s")}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0, help="metered window per program (default 30)")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds before the window opens (default 5)")
    p.add_argument("--cols", type=int, default=160)
    p.add_argument("--rows", type=int, default=50)
    p.add_argument("--replay", metavar="FILE", help="recording to replay (default: bundled, else synthetic)")
    p.add_argument("--live", action="store_true", help="also measure the live dashboard (needs a GPU)")
    p.add_argument("--nvitop", action="store_true", help="also measure nvitop, the reference")
    p.add_argument("--gpu-load", type=int, default=0, metavar="N",
                   help="keep N load processes on GPU 0 while measuring (benchmarks/gpu_load.py)")
    p.add_argument("--runs", type=int, default=1, metavar="N",
                   help="measure every program N times, interleaved (default 1); summaries are medians")
    p.add_argument("--baseline", metavar="DIR",
                   help="also measure the dashboard of another checkout (e.g. main) beside this one")
    p.add_argument("--together", action="store_true",
                   help="run the programs of each run at once, in one window, rather than in turn")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rec = recording(args.replay, Path(tmp))
        load = []
        if args.gpu_load:
            from benchmarks.gpu_load import start_load, stop_load, wait_on_gpu

            load = start_load(args.gpu_load, Path(tmp))
            print(f"GPU load processes on GPU 0: {wait_on_gpu(load)}")
        try:
            if args.together:
                results = [r for _ in range(args.runs) for r in measure_together(programs(args, rec), args)]
            else:
                results = [measure(name, cmd, cwd, args) for _ in range(args.runs)
                           for name, cmd, cwd in programs(args, rec)]
        finally:
            if load:
                stop_load(load)
    reference = NVITOP if any(r["program"] == NVITOP for r in results) else \
        BASELINE if args.baseline else "idle Textual app"
    print(f"pty {args.cols}x{args.rows}, {args.seconds:g} s window after {args.warmup:g} s warm-up, "
          f"{os.cpu_count()} CPUs, recording {rec.name}")
    print(table(results, reference))
    keys = summary(results)
    print("  ".join(f"{k}={v:.3g}" for k, v in keys.items() if v is not None))
    out = args.json or (str(Path(os.environ["OUT"]) / "tui_cost.json") if os.environ.get("OUT") else None)
    if out:
        Path(out).write_text(json.dumps({"cols": args.cols, "rows": args.rows, "seconds": args.seconds,
                                         "recording": str(rec), "runs": args.runs, **keys,
                                         "results": results}, indent=2))
    return 0 if all(not r.get("error") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
