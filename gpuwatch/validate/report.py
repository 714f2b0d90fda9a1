"""The incident's tables, as a terminal table, Markdown (VALIDATION.md) and JSON: capacity (closed loop, full
load) and latency at the same offered load for every stage (open loop), with whether each step helps.

This module writes the three files and reads a finished run back from its details; the rows and cells are
``report_tables``' and the Markdown ``report_markdown``'s (``rows``, ``markdown`` and ``summary`` are
importable from here too).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from gpuwatch.model.finding import Finding
from gpuwatch.validate.report_markdown import markdown
from gpuwatch.validate.report_tables import (
    COLUMNS,
    LATENCY_COLUMNS,
    SHAPE_COLUMNS,
    capacity_verdict,
    cell,
    latency_rows,
    rows,
    shape_cells,
    summary,
)
from gpuwatch.validate.runner import StageRun
from gpuwatch.validate.steps import steps
from gpuwatch.validate.views import Validation

__all__ = ["details", "from_details", "markdown", "rows", "summary", "terminal_tables", "write"]


def terminal_tables(v: Validation, title: str) -> list[Table]:
    capacity = Table(title=f"{title}: capacity (closed loop, full load)", title_justify="left")
    for key, header in (*COLUMNS, ("vs", "vs previous")):
        capacity.add_column(header, justify="left" if key in ("stage", "top_finding") else "right", overflow="fold")
    verdict = {s.stage: capacity_verdict(s.capacity_ratio) for s in steps(v)}
    for row in rows(v):
        capacity.add_row(*(cell(row[k]) for k, _ in COLUMNS), verdict.get(row["stage"], ""))
    tables = [capacity]
    for shape in v.shapes:
        t = Table(title=f"{title}: {shape} traffic, R = {cell(v.shared_rate)} req/s offered", title_justify="left")
        for key, header in SHAPE_COLUMNS:
            t.add_column(header, justify="left" if key in ("stage", "top") else "right", overflow="fold")
        for cells in shape_cells(v, shape):
            t.add_row(*cells)
        tables.append(t)
    for rate in v.rates:
        t = Table(title=f"{title}: latency at {rate:g} req/s offered (open loop)", title_justify="left")
        for key, header in LATENCY_COLUMNS:
            t.add_column(header, justify="left" if key == "stage" else "right")
        for line in latency_rows(v, rate):
            t.add_row(*(cell(line[k]) for k, _ in LATENCY_COLUMNS))
        tables.append(t)
    return tables


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
