"""The incident's tables as data, row by row: validation.json's rows, the cells of each traffic shape's and
each offered rate's table, and the headline. The terminal tables (``report``) and VALIDATION.md
(``report_markdown``) render these, so the two cannot disagree on a number or on how it is written.
"""

from __future__ import annotations

from typing import Any

from gpuwatch.validate.runner import StageRun
from gpuwatch.validate.shapes import acceptance_parts, capacity_cell, ladder, p99_cell, shared_phase, sizing
from gpuwatch.validate.views import Validation, spread

COLUMNS = (("stage", "stage"), ("gpu_util", "GPU-Util %"), ("sm_active", "SM activity %"),
           ("sm_occupancy", "SM occupancy %"), ("tensor_active", "tensor activity %"), ("req_per_s", "req/s"),
           ("p99_ms", "p99 ms"), ("top_finding", "top finding"))
LATENCY_COLUMNS = (("stage", "stage"), ("req_per_s", "served req/s"), ("p50_ms", "p50 ms"), ("p95_ms", "p95 ms"),
                   ("p99_ms", "p99 ms"), ("dropped_pct", "dropped or late %"), ("mean_batch", "mean batch"),
                   ("gpu_util", "GPU-Util %"))


def cell(value: Any) -> str:
    """One value as every table writes it: ``-`` for none, floats without trailing zeros."""
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _latency(run: StageRun | None) -> dict[str, Any]:
    w = (run.workload or {}) if run else {}
    return {"p99_ms": w.get("p99_ms"), "dropped": w.get("dropped_pct"),
            "failed": run.error if run else None}


def rows(v: Validation) -> list[dict[str, Any]]:
    """validation.json: the capacity row per stage (its historic keys first), then the latency view."""
    out = []
    for stage in v.stages:
        cap = v.capacity_run(stage)
        row = cap.row() if cap else StageRun(stage, error="not run").row()
        if v.shapes:
            row.update(rate=v.shared_rate, req_per_s_runs=v.capacity_runs_req_per_s(stage),
                       traffic={shape: _shape_row(v, shape, stage) for shape in v.shapes})
            out.append(row)
            continue
        shared = _latency(v.latency_run(v.rates[0], stage)) if v.rates else _latency(None)
        row.update(rate=v.rates[0] if v.rates else None, p99_ms_at_rate=shared["p99_ms"], dropped=shared["dropped"])
        high = _latency(v.latency_run(v.rates[1], stage)) if len(v.rates) > 1 else _latency(None)
        row.update(rate_high=v.rates[1] if len(v.rates) > 1 else None, p99_ms_at_rate_high=high["p99_ms"],
                   dropped_at_rate_high=high["dropped"], req_per_s_runs=v.capacity_runs_req_per_s(stage))
        out.append(row)
    return out


def _shape_row(v: Validation, shape: str, stage: str) -> dict[str, Any]:
    """One stage under one shape: what it sustains, where it sits in the planning band, p99 at the shared rate."""
    run = v.traffic.get(stage)
    size = sizing(ladder(run, shape))
    at = shared_phase(run, shape) or {}
    return {"capacity_req_per_s": size.capacity, "capacity_is_lower_bound": size.top_rung,
            "planning_req_per_s": size.planning, "band": size.band_note,
            "p99_ms_at_rate": at.get("p99_ms"), "p99_is_lower_bound": bool(at.get("p99_is_lower_bound")),
            "dropped_at_rate": at.get("dropped_pct"),
            "gpu_util_at_rate": at.get("gpu_util"), "top_finding_at_rate": at.get("top_finding"),
            "failed": run.error if run else "not run"}


SHAPE_COLUMNS = (("stage", "stage"), ("capacity", "capacity req/s"), ("planning", "planning req/s"),
                 ("p99", "p99 ms at R"), ("late", "late % at R"), ("gpu", "GPU-Util % at R"),
                 ("top", "top finding at R"))


def shape_cells(v: Validation, shape: str) -> list[list[str]]:
    """One traffic shape's table, a row of cells per stage (columns: ``SHAPE_COLUMNS``)."""
    out = []
    for stage in v.stages:
        r = _shape_row(v, stage=stage, shape=shape)
        size = sizing(ladder(v.traffic.get(stage), shape))
        cap = capacity_cell(size) if not r["failed"] else f"failed: {r['failed']}"
        out.append([stage, cap, cell(r["planning_req_per_s"]) if r["planning_req_per_s"] else f"- ({r['band']})",
                    p99_cell(shared_phase(v.traffic.get(stage), shape) or {}), cell(r["dropped_at_rate"]),
                    cell(r["gpu_util_at_rate"]),
                    r["top_finding_at_rate"] or "-"])
    return out


def latency_rows(v: Validation, rate: float) -> list[dict[str, Any]]:
    """The latency table at one offered rate, a row per stage (keys: ``LATENCY_COLUMNS``, and its error)."""
    out = []
    for stage in v.stages:
        run = v.latency_run(rate, stage)
        w = (run.workload or {}) if run else {}
        g = run.row()["gpu_util"] if run else None
        out.append({"stage": stage, **{k: w.get(k) for k, _ in LATENCY_COLUMNS[1:-1]}, "gpu_util": g,
                    "error": run.error if run else "not run"})
    return out


def capacity_verdict(ratio: float | None) -> str:
    """The capacity table's "vs previous" cell."""
    if ratio is None:
        return "-"
    return f"{ratio:g}x" if ratio > 1 else f"{ratio:g}x: not faster"


def speedup(v: Validation) -> float | None:
    """The last stage's req/s against naive's (the median of its runs)."""
    table = rows(v)
    if len(table) < 2:
        return None
    first, last = table[0]["req_per_s"], table[-1]["req_per_s"]
    return round(last / first, 1) if first and last else None


def summary(v: Validation) -> list[str]:
    """The incident's headline: throughput, its spread, and p99 at the shared rate from first to last stage."""
    table = rows(v)
    out = []
    if (x := speedup(v)) is not None:
        line = f"last stage against {table[0]['stage']}: {x}x req/s"
        runs = spread(table[0]["req_per_s_runs"])
        if runs and table[-1]["req_per_s"]:
            last = table[-1]["req_per_s"]
            line += (f" ({table[0]['stage']} over {runs['runs']} runs: {runs['min']:g}-{runs['max']:g} req/s, "
                     f"so {last / runs['max']:.1f}x-{last / runs['min']:.1f}x)")
        out.append(line)
    for shape in v.shapes:
        out.append(f"{shape}: {acceptance_parts(v.stages, v.traffic, shape, v.shared_rate)[0]}")
    if v.rates and len(table) >= 2 and table[0]["p99_ms_at_rate"] and table[-1]["p99_ms_at_rate"]:
        out.append(f"p99 at {v.rates[0]:g} req/s offered to every stage: {table[0]['p99_ms_at_rate']:g} ms "
                   f"({table[0]['stage']}) -> {table[-1]['p99_ms_at_rate']:g} ms ({table[-1]['stage']})")
    return out


