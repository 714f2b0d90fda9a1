"""The incident's tables, as a terminal table, Markdown (VALIDATION.md) and JSON: capacity (closed loop, full
load) and latency at the same offered load for every stage (open loop), with whether each step helps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from gpuwatch.model.finding import Finding
from gpuwatch.validate.runner import StageRun
from gpuwatch.validate.shapes import (
    BAND,
    LADDER,
    acceptance,
    acceptance_parts,
    capacity_cell,
    ladder,
    p99_cell,
    shape_steps,
    shared_phase,
    sizing,
)
from gpuwatch.validate.steps import step_line, steps
from gpuwatch.validate.views import Validation, spread

COLUMNS = (("stage", "stage"), ("gpu_util", "GPU-Util %"), ("sm_active", "SM activity %"),
           ("sm_occupancy", "SM occupancy %"), ("tensor_active", "tensor activity %"), ("req_per_s", "req/s"),
           ("p99_ms", "p99 ms"), ("top_finding", "top finding"))
LATENCY_COLUMNS = (("stage", "stage"), ("req_per_s", "served req/s"), ("p50_ms", "p50 ms"), ("p95_ms", "p95 ms"),
                   ("p99_ms", "p99 ms"), ("dropped_pct", "dropped or late %"), ("mean_batch", "mean batch"),
                   ("gpu_util", "GPU-Util %"))


def _cell(value: Any) -> str:
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


def _shape_cells(v: Validation, shape: str) -> list[list[str]]:
    out = []
    for stage in v.stages:
        r = _shape_row(v, stage=stage, shape=shape)
        size = sizing(ladder(v.traffic.get(stage), shape))
        cap = capacity_cell(size) if not r["failed"] else f"failed: {r['failed']}"
        out.append([stage, cap, _cell(r["planning_req_per_s"]) if r["planning_req_per_s"] else f"- ({r['band']})",
                    p99_cell(shared_phase(v.traffic.get(stage), shape) or {}), _cell(r["dropped_at_rate"]),
                    _cell(r["gpu_util_at_rate"]),
                    r["top_finding_at_rate"] or "-"])
    return out


def _shape_markdown(v: Validation) -> list[str]:
    rate = v.shared_rate
    out = ["", f"## Traffic shapes: every stage under each shape at {_cell(rate)} requests/s, and what it sustains",
           "", f"Each stage runs once for the whole view, its phases back to back (model built and graphs captured "
           f"once): per shape, {_cell(rate)} req/s offered to every stage (R below), then a ladder of rising "
           f"offered rates ({', '.join(f'{x:g}' for x in LADDER)} x its closed-loop capacity) that stops at the "
           "first rate it cannot sustain. Capacity: the highest offered rate sustained with p99 under the "
           "objective and under 1 % late (late, shed or never answered), every lower rung sustained too (>=: it "
           f"sustained the top rung). Planning: the highest sustained rate whose GPU-Util sits in the "
           f"{BAND[0]:g}-{BAND[1]:g} % band."]
    if v.mix:
        out.append(f"Mixed: the three shapes superposed at weights {_mix(v.mix)}.")
    for shape in v.shapes:
        out += ["", f"### {shape}", "", "| " + " | ".join(h for _, h in SHAPE_COLUMNS) + " |",
                "|" + "---|" * len(SHAPE_COLUMNS)]
        out += ["| " + " | ".join(c.replace("|", "/") for c in cells) + " |" for cells in _shape_cells(v, shape)]
        out += ["", f"- {acceptance(v.stages, v.traffic, shape, rate)}"]
        out += [f"- {s.stage} over {s.previous}: {s.line}" for s in shape_steps(v.stages, v.traffic, shape, rate)]
    if "mixed" in v.shapes:
        out += ["", "## Capacity for planning: the mixed shape", "",
                "| stage | sustains req/s | plan at req/s | band |", "|---|---|---|---|"]
        for stage in v.stages:
            size = sizing(ladder(v.traffic.get(stage), "mixed"))
            out.append(f"| {stage} | {capacity_cell(size)} | {_cell(size.planning)} | {size.band_note} |")
    return out


def _mix(mix: dict[str, float]) -> str:
    return ", ".join(f"{k} {w:g}" for k, w in mix.items())


def _ladder_lines(v: Validation, stage: str) -> list[str]:
    out = []
    run = v.traffic.get(stage)
    if run is not None and run.error:
        out.append(f"- traffic run failed: {run.error}")
    for shape in v.shapes:
        rungs = ladder(run, shape)
        if rungs:
            out.append(f"- {shape} ladder: " + "; ".join(
                f"{p['rate']:g} req/s {'ok' if p.get('passed') else 'not sustained'} (p99 {p99_cell(p)} "
                f"ms, {_cell(p.get('dropped_pct'))}% late, GPU-Util {_cell(p.get('gpu_util'))}%)" for p in rungs))
    return out


def terminal_tables(v: Validation, title: str) -> list[Table]:
    capacity = Table(title=f"{title}: capacity (closed loop, full load)", title_justify="left")
    for key, header in (*COLUMNS, ("vs", "vs previous")):
        capacity.add_column(header, justify="left" if key in ("stage", "top_finding") else "right", overflow="fold")
    verdict = {s.stage: _capacity_verdict(s.capacity_ratio) for s in steps(v)}
    for row in rows(v):
        capacity.add_row(*(_cell(row[k]) for k, _ in COLUMNS), verdict.get(row["stage"], ""))
    tables = [capacity]
    for shape in v.shapes:
        t = Table(title=f"{title}: {shape} traffic, R = {_cell(v.shared_rate)} req/s offered", title_justify="left")
        for key, header in SHAPE_COLUMNS:
            t.add_column(header, justify="left" if key in ("stage", "top") else "right", overflow="fold")
        for cells in _shape_cells(v, shape):
            t.add_row(*cells)
        tables.append(t)
    for rate in v.rates:
        t = Table(title=f"{title}: latency at {rate:g} req/s offered (open loop)", title_justify="left")
        for key, header in LATENCY_COLUMNS:
            t.add_column(header, justify="left" if key == "stage" else "right")
        for line in _latency_rows(v, rate):
            t.add_row(*(_cell(line[k]) for k, _ in LATENCY_COLUMNS))
        tables.append(t)
    return tables


def _latency_rows(v: Validation, rate: float) -> list[dict[str, Any]]:
    out = []
    for stage in v.stages:
        run = v.latency_run(rate, stage)
        w = (run.workload or {}) if run else {}
        g = run.row()["gpu_util"] if run else None
        out.append({"stage": stage, **{k: w.get(k) for k, _ in LATENCY_COLUMNS[1:-1]}, "gpu_util": g,
                    "error": run.error if run else "not run"})
    return out


def _capacity_verdict(ratio: float | None) -> str:
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


def markdown(v: Validation, meta: dict[str, Any]) -> str:
    out = ["# gpuwatch validate: the incident, stage by stage", ""]
    out += [f"- {k}: {val}" for k, val in meta.items()]
    out += [f"- {line}" for line in summary(v)]
    out += ["", "## Capacity: each stage closed loop at full load", ""]
    headers = [h for _, h in COLUMNS] + ["vs previous"]
    out += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    verdict = {s.stage: _capacity_verdict(s.capacity_ratio) for s in steps(v)}
    for row in rows(v):
        cells = [_cell(row[k]).replace("|", "/") for k, _ in COLUMNS] + [verdict.get(row["stage"], "")]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Percentages are medians over the sampled window; req/s and p99 come from the workload itself. "
            "Closed loop, p99 is mostly queueing behind the requests in flight: compare latency below."]
    if v.shapes:
        out += _shape_markdown(v)
    for i, rate in enumerate(v.rates):
        what = "the shared rate (a share of naive's capacity)" if i == 0 else "a rate only later stages sustain"
        out += ["", f"## Latency at {rate:g} requests/s offered to every stage, open loop: {what}", ""]
        out += ["| " + " | ".join(h for _, h in LATENCY_COLUMNS) + " |", "|" + "---|" * len(LATENCY_COLUMNS)]
        for line in _latency_rows(v, rate):
            cells = [_cell(line[k]) for k, _ in LATENCY_COLUMNS]
            if line["error"]:
                cells[-1] += f" (failed: {line['error']})".replace("|", "/")
            out.append("| " + " | ".join(cells) + " |")
    if not v.shapes:
        out += ["", "## Does every step help?", ""]
        for s in steps(v):
            out.append(f"- {s.stage} over {s.previous}: {step_line(s)}")
    out += ["", "## Per stage"]
    for stage in v.stages:
        out += _per_stage(v, stage)
    return "\n".join(out) + "\n"


def _per_stage(v: Validation, stage: str) -> list[str]:
    out = ["", f"### {stage}", ""]
    run = v.capacity_run(stage)
    if run is None:
        return [*out, "- not run"]
    if run.error:
        out.append(f"- failed: {run.error}")
    notes = (run.workload or {}).get("notes", {})
    for key in ("compiler", "graphs", "compiler_error", "bf16_check", "workers", "in_flight",
                "max_batch_delay_ms", "queue_timeout_ms"):
        if key in notes:
            out.append(f"- {key}: {notes[key]}")
    if runs := spread(v.capacity_runs_req_per_s(stage)):
        out.append(f"- capacity over {runs['runs']} runs: {runs['min']:g} / {runs['median']:g} / {runs['max']:g} "
                   "req/s (min / median / max)")
    if w := run.workload:
        out.append(f"- full load: p50/p95/p99 {w.get('p50_ms')} / {w.get('p95_ms')} / {w.get('p99_ms')} ms, "
                   f"mean batch {w.get('mean_batch')}, shed {w.get('shed', 0)}")
    for f in run.findings[:3]:
        out.append(f"- **{f.severity}** {f.title}: {'; '.join(f.evidence)}")
    return out + _ladder_lines(v, stage)


def details(v: Validation) -> dict[str, Any]:
    def one(run: StageRun) -> dict[str, Any]:
        return {"stage": run.stage, "row": run.row(), "workload": run.workload, "error": run.error,
                "window": run.window, "samples": len(run.snapshots), "findings": [f.to_dict() for f in run.findings]}

    out: dict[str, Any] = {"capacity": [one(r) for s in v.stages for r in v.capacity.get(s, [])],
           "latency": {f"{rate:g}": [one(r) for r in v.latency.get(rate, {}).values()] for rate in v.rates},
           "rates": v.rates}
    if v.shapes:
        out.update(shapes=v.shapes, shared_rate=v.shared_rate, mix=v.mix,
                   traffic=[one(r) for s in v.stages if (r := v.traffic.get(s)) is not None])
    return out


def from_details(data: dict[str, Any]) -> tuple[Validation, dict[str, Any]]:
    """A finished run back from its ``validation-details.json``: re-rendering it with the current report
    code changes the words, never a number."""
    def one(d: dict[str, Any]) -> StageRun:
        window = d.get("window")
        return StageRun(stage=d["stage"], workload=d.get("workload"), error=d.get("error"),
                        window=None if window is None else (float(window[0]), float(window[1])),
                        findings=[Finding.from_dict(f) for f in d.get("findings", [])], recorded_row=d["row"])

    capacity: dict[str, list[StageRun]] = {}
    for d in data["capacity"]:
        capacity.setdefault(d["stage"], []).append(one(d))
    rates = [float(r) for r in data.get("rates", [])]
    latency = {rate: {d["stage"]: one(d) for d in data["latency"].get(f"{rate:g}", [])} for rate in rates}
    traffic = {d["stage"]: one(d) for d in data.get("traffic", [])}
    shared = data.get("shared_rate")
    stages = list(capacity) + [s for s in traffic if s not in capacity]
    return Validation(stages=stages, capacity=capacity, rates=rates, latency=latency,
                      shapes=[str(x) for x in data.get("shapes", [])], traffic=traffic,
                      shared_rate=None if shared is None else float(shared),
                      mix={str(k): float(w) for k, w in data.get("mix", {}).items()}), dict(data["meta"])


def write(out: Path, v: Validation, meta: dict[str, Any]) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "validation.json", "markdown": out / "VALIDATION.md",
             "details": out / "validation-details.json"}
    paths["json"].write_text(json.dumps(rows(v), indent=2) + "\n")
    paths["markdown"].write_text(markdown(v, meta))
    paths["details"].write_text(json.dumps({"meta": meta, **details(v)}, indent=2) + "\n")
    return paths
