"""Scale grid: what one more GPU and one more process cost, for the tick and for a /metrics scrape.

GPUs come from the fake NVML (a driver per GPU cannot be had here); processes are real: ``sleep`` processes
whose pids the fake GPUs report, so the host source reads real /proc files for each. For every cell of
GPUs x processes per GPU the tick (``Sampler.tick()`` over the NVML and host sources) and the in-process
rendering of /metrics are timed; a least-squares fit then gives the cost per added GPU and per added
process. On the GPU machine the same grid runs (still on the fake NVML: one H200 cannot be eight).

    python benchmarks/scale_grid.py              # prints the table; --json FILE keeps it
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from benchmarks.stats import time_calls  # noqa: E402
from gpuwatch.exporter import Exporter, SnapshotCollector, render  # noqa: E402
from gpuwatch.sampler.collector import LiveCollector  # noqa: E402
from gpuwatch.sampler.sampler import Sampler  # noqa: E402
from gpuwatch.sources.host import HostSource  # noqa: E402
from gpuwatch.sources.nvml import NvmlSource  # noqa: E402

GPUS = (1, 2, 4, 8)
PROCESSES_PER_GPU = (1, 16, 64, 256)


def _sleepers(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen(["sleep", "3600"]) for _ in range(n)]


def _cell(gpus: int, per_gpu: int, pids: list[int], n: int) -> dict[str, float]:
    from fakes.fake_pynvml import make_fake_nvml

    fake = make_fake_nvml(gpus=gpus, processes_per_gpu=per_gpu)
    k = 0
    for gpu in fake.gpus:
        for proc in gpu.processes:
            proc.pid = pids[k]
            k += 1
    sampler = Sampler(LiveCollector([NvmlSource(nvml=fake), HostSource()]), interval=1.0)
    try:
        for _ in range(3):  # the host source's first look at each process (static details) is not a tick's
            sampler.tick()
        tick = time_calls(sampler.tick, n, warmup=1)
        snap = sampler.latest
        registry = Exporter(SnapshotCollector(lambda: snap)).registry
        scrape = time_calls(lambda: render(registry), max(5, n // 2), warmup=1)
    finally:
        sampler.producer.close()
    return {"tick_ms": round(tick.median_ms, 3), "scrape_ms": round(scrape.median_ms, 3)}


def _fit(cells: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Least squares ``key = base + per_gpu * gpus + per_process * processes`` (ms, then µs per unit)."""
    rows = [(1.0, float(c["gpus"]), float(c["processes"]), float(c[key])) for c in cells]
    # normal equations for three unknowns, solved by Cramer's rule (no numpy needed)
    s = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    t = [sum(r[i] * r[3] for r in rows) for i in range(3)]

    def det(m: list[list[float]]) -> float:
        return (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]))

    d = det(s)
    if d == 0:
        return {}
    coef = [det([[t[r] if c == i else s[r][c] for c in range(3)] for r in range(3)]) / d for i in range(3)]
    return {"base_ms": round(coef[0], 3), "per_gpu_us": round(coef[1] * 1000, 1),
            "per_process_us": round(coef[2] * 1000, 1)}


def bench_scale_grid(n: int = 15) -> dict[str, Any]:
    most = max(GPUS) * max(PROCESSES_PER_GPU)
    sleepers = _sleepers(most)
    try:
        time.sleep(0.5)
        pids = [p.pid for p in sleepers]
        cells = []
        for gpus in GPUS:
            for per_gpu in PROCESSES_PER_GPU:
                cell = _cell(gpus, per_gpu, pids, n)
                cells.append({"gpus": gpus, "processes": gpus * per_gpu, **cell})
                print(f"scale grid: {gpus} GPU(s) x {per_gpu} processes: tick {cell['tick_ms']} ms, "
                      f"scrape {cell['scrape_ms']} ms", file=sys.stderr, flush=True)
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()
    return {"scale_grid": {"cells": cells, "tick_fit": _fit(cells, "tick_ms"), "scrape_fit": _fit(cells, "scrape_ms"),
                           "how": "fake NVML GPUs, real sleep processes (real /proc reads); median of "
                                  f"{n} ticks and {max(5, n // 2)} in-process /metrics renderings per cell"}}


def markdown(grid: dict[str, Any]) -> list[str]:
    """The grid as a Markdown table: tick / scrape ms per cell, then the fitted cost per GPU and process."""
    cells = {(c["gpus"], c["processes"] // c["gpus"]): c for c in grid["cells"]}
    gpus = sorted({g for g, _ in cells})
    per = sorted({p for _, p in cells})
    out = ["| processes per GPU | " + " | ".join(f"{g} GPU{'s' if g > 1 else ''}: tick / scrape ms" for g in gpus)
           + " |", "|" + "---|" * (len(gpus) + 1)]
    for p in per:
        out.append(f"| {p} | " + " | ".join(
            f"{cells[(g, p)]['tick_ms']:g} / {cells[(g, p)]['scrape_ms']:g}" if (g, p) in cells else "-"
            for g in gpus) + " |")
    tick, scrape = grid.get("tick_fit") or {}, grid.get("scrape_fit") or {}
    if tick and scrape:
        out += ["", f"Fitted: a tick costs {tick['base_ms']:g} ms + {tick['per_gpu_us']:g} µs per GPU + "
                f"{tick['per_process_us']:g} µs per process; a scrape {scrape['base_ms']:g} ms + "
                f"{scrape['per_gpu_us']:g} µs per GPU + {scrape['per_process_us']:g} µs per process "
                f"({grid['how']})."]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=15, help="ticks timed per cell")
    p.add_argument("--json", type=Path, help="write the results here")
    args = p.parse_args(argv)
    res = bench_scale_grid(args.n)
    print("\n".join(markdown(res["scale_grid"])))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
