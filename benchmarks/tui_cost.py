"""What the dashboard costs: CPU (percent of one core) and RSS of ``gpuwatch tui`` in a pty of fixed size,
beside an idle Textual app and, on a GPU machine, nvitop, all at 1 s refresh.

Each program runs alone, in turn, on a fresh 160x50 pty whose output a thread drains as a terminal would;
after a warm-up the CPU time of its process tree is metered over the window.

    python benchmarks/tui_cost.py                      # here: idle Textual app vs gpuwatch tui --replay
    python benchmarks/tui_cost.py --live --nvitop --gpu-load 4   # on the GPU machine: live gpuwatch and
                                                                 # nvitop, 4 processes on the GPU as the
                                                                 # anchor measurement had

Results print as a table; ``--json FILE`` (default ``$OUT/tui_cost.json`` when $OUT is set) keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def programs(args: argparse.Namespace, rec: Path) -> list[tuple[str, list[str]]]:
    progs = [("idle Textual app", [PY, "-c", IDLE_APP]),
             ("gpuwatch tui --replay (1 s)", [PY, "-m", "gpuwatch", "tui", "--replay", str(rec), "--loop"])]
    if args.live:
        progs.append(("gpuwatch tui live (1 s)", [PY, "-m", "gpuwatch", "tui", "--interval", "1"]))
    if args.nvitop:
        nvitop = shutil.which("nvitop")
        if nvitop is None:
            print("nvitop not found on PATH: skipped", file=sys.stderr)
        else:
            progs += [("nvitop", [nvitop]), ("nvitop --interval 1", [nvitop, "--interval", "1"])]
    return progs


def measure(name: str, cmd: list[str], args: argparse.Namespace) -> dict[str, object]:
    proc = start_in_pty(name, cmd, cols=args.cols, rows=args.rows, env={"TEXTUAL_ANIMATIONS": "none"})
    try:
        time.sleep(args.warmup)
        if not proc.alive():
            return {"program": name, "error": f"exited with {proc.popen.returncode} during warm-up"}
        meter = Meter(proc)
        measure_window([meter], args.seconds)
        return {"program": name, "command": " ".join(cmd), **meter.to_dict()}
    finally:
        proc.stop()


def table(results: list[dict[str, object]], reference: str | None) -> str:
    ref = next((r for r in results if r["program"] == reference and r.get("cpu_pct") is not None), None)
    lines = [f"{'program':34} {'CPU % of a core':>16} {'RSS MiB':>9} {'max RSS':>9} {'vs ' + (reference or '-'):>20}"]
    for r in results:
        if r.get("error"):
            lines.append(f"{r['program']:34} error: {r['error']}")
            continue
        ratio = ""
        if ref is not None and ref["cpu_pct"]:
            ratio = f"{float(r['cpu_pct']) / float(ref['cpu_pct']):.2f}x"  # type: ignore[arg-type]
        lines.append(f"{r['program']:34} {r['cpu_pct']:>16.2f} {r['rss_mib']:>9} {r['rss_max_mib']:>9} {ratio:>20}")
    return "\n".join(lines)


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
            results = [measure(name, cmd, args) for name, cmd in programs(args, rec)]
        finally:
            if load:
                stop_load(load)
    reference = "nvitop --interval 1" if any(r["program"] == "nvitop --interval 1" for r in results) \
        else "idle Textual app"
    print(f"pty {args.cols}x{args.rows}, {args.seconds:g} s window after {args.warmup:g} s warm-up, "
          f"{os.cpu_count()} CPUs, recording {rec.name}")
    print(table(results, reference))
    out = args.json or (str(Path(os.environ["OUT"]) / "tui_cost.json") if os.environ.get("OUT") else None)
    if out:
        Path(out).write_text(json.dumps({"cols": args.cols, "rows": args.rows, "seconds": args.seconds,
                                         "recording": str(rec), "results": results}, indent=2))
    return 0 if all(not r.get("error") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
