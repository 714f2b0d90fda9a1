"""The incident's table, as a terminal table, Markdown (VALIDATION.md) and JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from gpuwatch.validate.runner import StageRun

COLUMNS = (("stage", "stage"), ("gpu_util", "GPU-Util %"), ("sm_active", "SM activity %"),
           ("sm_occupancy", "SM occupancy %"), ("tensor_active", "tensor activity %"), ("req_per_s", "req/s"),
           ("p99_ms", "p99 ms"), ("top_finding", "top finding"))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def rows(runs: Sequence[StageRun]) -> list[dict[str, Any]]:
    return [run.row() for run in runs]


def terminal_table(runs: Sequence[StageRun], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for key, header in COLUMNS:
        table.add_column(header, justify="left" if key in ("stage", "top_finding") else "right",
                         overflow="fold")
    for row in rows(runs):
        table.add_row(*(_cell(row[key]) for key, _ in COLUMNS))
    return table


def speedup(runs: Sequence[StageRun]) -> float | None:
    """The last stage's req/s against the first's."""
    table = rows(runs)
    if len(table) < 2:
        return None
    first, last = table[0]["req_per_s"], table[-1]["req_per_s"]
    return round(last / first, 1) if first and last else None


def markdown(runs: Sequence[StageRun], meta: dict[str, Any]) -> str:
    out = ["# gpuwatch validate: the incident, stage by stage", ""]
    out += [f"- {k}: {v}" for k, v in meta.items()]
    if (x := speedup(runs)) is not None:
        out.append(f"- last stage against naive: {x}x req/s")
    out += ["", "| " + " | ".join(h for _, h in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    out += ["| " + " | ".join(_cell(row[k]).replace("|", "/") for k, _ in COLUMNS) + " |" for row in rows(runs)]
    out += ["", "Percentages are medians over the sampled window; req/s and p99 come from the workload itself.",
            "", "## Per stage"]
    for run in runs:
        out += ["", f"### {run.stage}", ""]
        if run.error:
            out.append(f"- failed: {run.error}")
        notes = (run.workload or {}).get("notes", {})
        for key in ("compiler", "graphs", "compiler_error", "bf16_check", "workers", "in_flight"):
            if key in notes:
                out.append(f"- {key}: {notes[key]}")
        if run.workload:
            w = run.workload
            out.append(f"- latency p50/p95/p99: {w.get('p50_ms')} / {w.get('p95_ms')} / {w.get('p99_ms')} ms, "
                       f"mean batch {w.get('mean_batch')}")
        for f in run.findings[:3]:
            out.append(f"- **{f.severity}** {f.title}: {'; '.join(f.evidence)}")
    return "\n".join(out) + "\n"


def details(runs: Sequence[StageRun]) -> list[dict[str, Any]]:
    return [{"stage": run.stage, "row": run.row(), "workload": run.workload, "error": run.error,
             "window": run.window, "samples": len(run.snapshots),
             "findings": [f.to_dict() for f in run.findings]} for run in runs]


def write(out: Path, runs: Sequence[StageRun], meta: dict[str, Any]) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "validation.json", "markdown": out / "VALIDATION.md",
             "details": out / "validation-details.json"}
    paths["json"].write_text(json.dumps(rows(runs), indent=2) + "\n")
    paths["markdown"].write_text(markdown(runs, meta))
    paths["details"].write_text(json.dumps({"meta": meta, "stages": details(runs)}, indent=2) + "\n")
    return paths
