"""VALIDATION.md: the incident's tables in Markdown (capacity, each traffic shape with its ladder, latency at
each offered rate), whether each step helps, and what each stage reported about itself."""

from __future__ import annotations

from typing import Any

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
from gpuwatch.validate.shapes import BAND, LADDER, acceptance, capacity_cell, ladder, p99_cell, shape_steps, sizing
from gpuwatch.validate.steps import step_line, steps
from gpuwatch.validate.views import Validation, spread


def _shape_markdown(v: Validation) -> list[str]:
    rate = v.shared_rate
    out = ["", f"## Traffic shapes: every stage under each shape at {cell(rate)} requests/s, and what it sustains",
           "", f"Each stage runs once for the whole view, its phases back to back (model built and graphs captured "
           f"once): per shape, {cell(rate)} req/s offered to every stage (R below), then a ladder of rising "
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
        out += ["| " + " | ".join(c.replace("|", "/") for c in cells) + " |" for cells in shape_cells(v, shape)]
        out += ["", f"- {acceptance(v.stages, v.traffic, shape, rate)}"]
        out += [f"- {s.stage} over {s.previous}: {s.line}" for s in shape_steps(v.stages, v.traffic, shape, rate)]
    if "mixed" in v.shapes:
        out += ["", "## Capacity for planning: the mixed shape", "",
                "| stage | sustains req/s | plan at req/s | band |", "|---|---|---|---|"]
        for stage in v.stages:
            size = sizing(ladder(v.traffic.get(stage), "mixed"))
            out.append(f"| {stage} | {capacity_cell(size)} | {cell(size.planning)} | {size.band_note} |")
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
                f"ms, {cell(p.get('dropped_pct'))}% late, GPU-Util {cell(p.get('gpu_util'))}%)" for p in rungs))
    return out


def markdown(v: Validation, meta: dict[str, Any]) -> str:
    out = ["# gpuwatch validate: the incident, stage by stage", ""]
    out += [f"- {k}: {val}" for k, val in meta.items()]
    out += [f"- {line}" for line in summary(v)]
    out += ["", "## Capacity: each stage closed loop at full load", ""]
    headers = [h for _, h in COLUMNS] + ["vs previous"]
    out += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    verdict = {s.stage: capacity_verdict(s.capacity_ratio) for s in steps(v)}
    for row in rows(v):
        cells = [cell(row[k]).replace("|", "/") for k, _ in COLUMNS] + [verdict.get(row["stage"], "")]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Percentages are medians over the sampled window; req/s and p99 come from the workload itself. "
            "Closed loop, p99 is mostly queueing behind the requests in flight: compare latency below."]
    if v.shapes:
        out += _shape_markdown(v)
    for i, rate in enumerate(v.rates):
        what = "the shared rate (a share of naive's capacity)" if i == 0 else "a rate only later stages sustain"
        out += ["", f"## Latency at {rate:g} requests/s offered to every stage, open loop: {what}", ""]
        out += ["| " + " | ".join(h for _, h in LATENCY_COLUMNS) + " |", "|" + "---|" * len(LATENCY_COLUMNS)]
        for line in latency_rows(v, rate):
            cells = [cell(line[k]) for k, _ in LATENCY_COLUMNS]
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


