"""What `gpuwatch doctor` costs while it watches a live GPU job: percent of one core per second of watching.

A fault variant that leaves the GPU under-used runs as its own process (so the doctor samples its stacks and
follows its waits at the doctor's pace, the most it ever does). The doctor is run twice beside it, for a short
and a long duration; the difference of their CPU time (user + system, py-spy and every other child included:
each run is waited for, so its reaped children count) over the difference of their durations is what one more
second of watching costs, with start-up and the final report cancelled out. The same is done with --no-stacks,
and the long runs' difference says what stacks add to a watch that long. A first run is thrown away: py-spy's
first look at a torch process reads its native symbols from disk, later ones from the page cache.

    python benchmarks/doctor_live.py                       # on a GPU machine
    python benchmarks/doctor_live.py --fault feeder_python_pipe --short 15 --long 75
    python benchmarks/doctor_live.py --merge-into benchmarks/results-h200.json   # a row of BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def doctor_cpu_s(duration: float, extra: list[str]) -> tuple[float, float, str]:
    """CPU seconds (children included) and wall seconds of one `gpuwatch doctor --duration D --json` run,
    and its top finding's code."""
    before, start = _children_cpu_s(), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gpuwatch", "doctor", "--duration", str(duration), "--json",
                           *extra], capture_output=True, text=True, cwd=ROOT, check=False)
    wall, cpu = time.monotonic() - start, _children_cpu_s() - before
    try:
        findings = json.loads(done.stdout)["findings"]
        top = findings[0]["code"] if findings else "none"
    except (ValueError, KeyError, IndexError):
        top = f"error (rc {done.returncode}): {done.stderr.strip()[-200:]}"
    return cpu, wall, top


def measure(short: float, long: float, extra: list[str]) -> dict[str, object]:
    cpu_s, wall_s, top_s = doctor_cpu_s(short, extra)
    cpu_l, wall_l, top_l = doctor_cpu_s(long, extra)
    per_s = (cpu_l - cpu_s) / (long - short)
    return {"cpu_short_s": round(cpu_s, 3), "wall_short_s": round(wall_s, 2), "cpu_long_s": round(cpu_l, 3),
            "wall_long_s": round(wall_l, 2), "added_pct_of_core": round(100 * per_s, 3),
            "long_run_pct_of_core": round(100 * cpu_l / wall_l, 3),
            "top_short": top_s, "top_long": top_l}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fault", default="python_preprocess", help="fault variant to watch")
    # the short run outlasts the first py-spy round (about 12 s on the H200: the GPU found under-used, one 4 s
    # window, torch's native symbols), so both runs pay it whole and the difference is the steady cost
    parser.add_argument("--short", type=float, default=15.0, help="short run's duration, seconds")
    parser.add_argument("--long", type=float, default=75.0, help="long run's duration, seconds")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--merge-into", type=Path, metavar="RESULTS",
                        help="also store them as 'doctor_live' in a benchmark results file (results-h200.json)")
    args = parser.parse_args(argv)
    total = 2 * (args.short + args.long) + 40
    job = subprocess.Popen([sys.executable, "-m", "gpuwatch", "workload", "--fault", args.fault,
                            "--duration", str(total)], cwd=ROOT, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        time.sleep(12)  # torch import, CUDA context, the fault's warm-up
        # py-spy's first look at a torch process reads its native symbols from disk; later ones find them in
        # the page cache. One run thrown away first, so the short and the long run both pay the warm cost.
        doctor_cpu_s(args.short, [])
        results = {"fault": args.fault, "stacks": measure(args.short, args.long, []),
                   "no_stacks": measure(args.short, args.long, ["--no-stacks"])}
        stacks, plain = results["stacks"], results["no_stacks"]
        results["stacks_over_no_stacks_long_pct_of_core"] = round(
            100 * (stacks["cpu_long_s"] - plain["cpu_long_s"]) / plain["wall_long_s"], 3)
    finally:
        job.terminate()
        job.wait(timeout=30)
    print(f"| gpuwatch doctor beside `{args.fault}` | added CPU, % of one core | top finding |")
    print("| --- | ---: | --- |")
    for mode in ("stacks", "no_stacks"):
        row = results[mode]
        assert isinstance(row, dict)
        print(f"| {mode.replace('_', ' ')} (default)" if mode == "stacks" else f"| {mode.replace('_', ' ')}",
              f"| {row['added_pct_of_core']:.2f} | {row['top_long']} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.merge_into:
        merged = json.loads(args.merge_into.read_text())
        merged["doctor_live"] = {**results, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        args.merge_into.write_text(json.dumps(merged, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
