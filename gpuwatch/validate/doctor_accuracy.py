"""``gpuwatch validate --doctor``: inject every fault class on a GPU and check what the doctor says.

Each fault runs as its own process (like a real service) while the live sampler watches it; the doctor
judges the last ``window`` seconds, as ``gpuwatch doctor`` does live. The result is a confusion table:
the injected class, the doctor's top finding, the rank of the true class among the findings, and the
evidence. Every fault's samples are also written as a recording, so the table can be re-derived with
``gpuwatch doctor --replay`` and the tests can check the doctor on real signals.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.model.finding import Finding
from gpuwatch.model.recording import RecordingHeader, RecordingWriter, load
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.sampler.sampler import Sampler
from gpuwatch.validate.runner import Workload
from gpuwatch.workload.faults_catalogue import CLASSES, FAULTS, MECHANISM_FAULTS, cpu_side


@dataclass
class FaultRun:
    fault: str
    expected: str
    snapshots: list[Snapshot] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None

    @property
    def rank(self) -> int | None:
        """1-based rank of the expected class among the findings, or None when the doctor missed it."""
        return next((i for i, f in enumerate(self.findings, 1) if f.code == self.expected), None)

    def row(self) -> dict[str, Any]:
        top = top_problem(self.findings)
        shown = next((f for f in self.findings if f.code == self.expected), top)
        row = {"fault": self.fault, "expected": self.expected, "top": top.code if top else None,
               "top_title": top.title if top else None, "rank": self.rank,
               "correct": bool(top and top.code == self.expected), "samples": len(self.snapshots),
               "evidence": list(shown.evidence) if shown else [],
               "findings": [f"{f.severity}:{f.code}" for f in self.findings], "error": self.error,
               "half": FAULTS[self.fault].half, "look_alike": FAULTS[self.fault].look_alike}
        spec = FAULTS[self.fault]
        if spec.mechanism is None and spec.function is None:
            return row
        located = top if top is not None and _locations(top) else next(
            (f for f in self.findings if _locations(f)), top)
        locations = _locations(located) if located is not None else []
        found = getattr(top, "mechanism", None) if top is not None else None
        return {**row, "mechanism": spec.mechanism, "top_mechanism": found,
                "mechanism_right": None if spec.mechanism is None else found == spec.mechanism,
                "function": spec.function, "locations": locations,
                "function_in_top3": None if spec.function is None else function_among(spec.function, locations),
                "cpu_side": cpu_side(self.fault)}


def _locations(finding: Finding) -> list[list[Any]]:
    """A finding's top three code locations, ``[file.py:function, share]``; none when it carries none."""
    return [[str(loc), float(share)] for loc, share in (getattr(finding, "locations", None) or ())[:3]]


def function_among(function: str, locations: Sequence[Sequence[Any]]) -> bool:
    """Whether ``function`` is one of the locations (``file.py:function``, ``file.py:Class.function``)."""
    pattern = re.compile(rf"(?<!\w){re.escape(function)}(?!\w)")
    return any(pattern.search(str(loc[0])) for loc in locations)


def fault_argv(python: str, fault: str, duration: float) -> list[str]:
    return [python, "-m", "gpuwatch", "workload", "--fault", fault, "--duration", f"{duration:g}", "--json"]


def run_fault(fault: str, python: str, duration: float, window: float, sampler: Sampler, interval: float,
              on_sample: Callable[[float], None]) -> FaultRun:
    """Start the fault, wait until it is warm, sample ``duration`` seconds, diagnose the last ``window``."""
    result = FaultRun(fault, FAULTS[fault][0])
    work = Workload(fault_argv(python, fault, duration + 2.0))
    try:
        result.error = work.wait_ready()
        if result.error is not None:
            return result
        result.snapshots = work.sample(sampler, duration, interval, on_sample)
        if work.proc.poll() is not None and work.proc.returncode != 0:
            result.error = work.last_error()
    finally:
        work.kill()
    if result.snapshots:
        last = result.snapshots[-1].time
        result.findings = diagnose([s for s in result.snapshots if s.time >= last - window])
    return result


def write_recording(path: Path, run: FaultRun, interval: float) -> None:
    header = RecordingHeader(created=time.time(), interval_s=interval,
                             hostname=run.snapshots[0].host.hostname if run.snapshots else "",
                             description=f"gpuwatch workload --fault {run.fault}: {FAULTS[run.fault][1]}",
                             meta={"fault": run.fault, "expected": run.expected})
    with RecordingWriter(path, header) as writer:
        for snap in run.snapshots:
            writer.write(snap)


def judge_recordings(folder: Path, window: float) -> list[FaultRun]:
    """Every variant's recording in ``folder`` judged again by the current doctor (the last ``window``
    seconds), in the catalogue's order: the table follows the doctor, not the run that recorded it. A mechanism
    variant with no recording in ``folder`` is left out (an earlier class's is listed as missing)."""
    runs = []
    for fault in FAULTS:
        path = folder / f"{fault}.ndjson.gz"
        run = FaultRun(fault, FAULTS[fault].expected)
        if not path.exists() and fault in MECHANISM_FAULTS:
            continue  # the mechanism variants are recorded by a run of their own: judged once recorded
        if not path.exists():
            run.error = f"no recording {path.name}"
        else:
            run.snapshots = load(path)
            last = run.snapshots[-1].time if run.snapshots else 0.0
            run.findings = diagnose([s for s in run.snapshots if s.time >= last - window])
        runs.append(run)
    return runs


OUTCOMES = ("right first", "ranked lower", "missed", "false warning")


def outcome(row: dict[str, Any]) -> str:
    """One variant's outcome: a look-alike is right only with no warning at all."""
    if row.get("look_alike") and any(not f.startswith("info:") for f in row["findings"]):
        return "false warning"
    return "right first" if row["correct"] else "ranked lower" if row["rank"] else "missed"


def _class_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| class | fit: variants | fit: right first | check: variants | check: right first "
             "| check: ranked lower | check: missed | false warnings |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for cls in (c for c in CLASSES if any(r["expected"] == c for r in rows)):
        mine = [r for r in rows if r["expected"] == cls]
        by = {h: [outcome(r) for r in mine if r["half"] == h] for h in ("fit", "check")}
        false = sum(o == "false warning" for o in by["fit"] + by["check"])
        lines.append(f"| `{cls}` | {len(by['fit'])} | {by['fit'].count('right first')} | {len(by['check'])} "
                     f"| {by['check'].count('right first')} | {by['check'].count('ranked lower')} "
                     f"| {by['check'].count('missed')} | {false} |")
    return lines


def _mechanism_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The mechanism variants: whether the top finding names the mechanism, and whether the function doing
    the injected work is among its top three code locations (the hit rate counts the CPU-side variants; a
    GPU-side one's function only launches the kernel, its row is shown all the same)."""
    mine = [r for r in rows if "mechanism" in r]
    if not mine:
        return []
    named = [r for r in mine if r["mechanism"] is not None]
    located = [r for r in mine if r["cpu_side"]]
    hits = {h: [r for r in located if r["half"] == h] for h in ("fit", "check")}
    lines = [f"**Mechanism right: {sum(bool(r['mechanism_right']) for r in named)} of {len(named)} variants. "
             f"The function doing the injected work among the top 3 code locations: "
             f"{sum(bool(r['function_in_top3']) for r in located)} of {len(located)} CPU-side variants "
             f"({100 * sum(bool(r['function_in_top3']) for r in located) / max(1, len(located)):.0f}%; fit "
             f"{sum(bool(r['function_in_top3']) for r in hits['fit'])} of {len(hits['fit'])}, check "
             f"{sum(bool(r['function_in_top3']) for r in hits['check'])} of {len(hits['check'])}).**", "",
             "| variant | half | mechanism | doctor's mechanism | injected function | top code locations "
             "| function in top 3 |", "| --- | --- | --- | --- | --- | --- | --- |"]

    def mark(value: bool | None) -> str:
        return "-" if value is None else "yes" if value else "no"

    for r in mine:
        where = ", ".join(f"`{loc}` {100 * share:.0f}%" for loc, share in r["locations"]) or "none"
        side = "" if r["cpu_side"] else " (GPU-side)"
        found = f"`{r['top_mechanism']}`" if r["top_mechanism"] else "none"
        expected, judged = (f"`{r['mechanism']}`", f" ({mark(r['mechanism_right'])})") if r["mechanism"] else ("-", "")
        lines.append(f"| {r['fault']} | {r['half']} | {expected} | {found}{judged} | `{r['function']}`{side} "
                     f"| {where} | {mark(r['function_in_top3'])} |")
    return [*lines, ""]


def markdown(rows: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The per-class table (fitted half and held-back half) and every variant's row, from the JSON rows (so
    a committed run can be re-rendered without a GPU)."""
    half = {h: [r for r in rows if r["half"] == h] for h in ("fit", "check")}
    right = {h: sum(outcome(r) == "right first" for r in half[h]) for h in half}
    looks = [r for r in rows if r.get("look_alike")]
    lines = ["# The doctor on injected faults", "",
             "Generated by `gpuwatch validate --doctor` (on a GPU machine: `bash scripts/gpu_doctor_run.sh`; "
             "`gpuwatch validate --doctor --from-recordings DIR` judges the recordings again). Each variant of "
             "`gpuwatch workload --fault` ran as its own process under the live sampler, and the doctor judged "
             f"the last {meta['window_s']:g} s, as `gpuwatch doctor` does live. Every class has at least three "
             "variants that differ in structure (threads, a pool or processes; one direction or the other; the "
             "host quiet or busy; FP32, FP16 or BF16). The thresholds were chosen from the numbers of the **fit** "
             "half only; the **check** half was never used to set one, so its column is how the doctor does "
             "on work it was not fitted to (its outcomes were printed by the same runs, and a change that "
             "would have broken one was replaced by one that follows the mechanism). Each recording is a "
             "test fixture (`tests/doctor/fixtures/faults/`), "
             "and a test renders this page again from them with the current doctor. Thermal or hardware "
             "slowdown is not injected (that would mean changing the GPU's clocks or power limit); synthetic "
             "windows test it.", "",
             *(f"- {k}: {v}" for k, v in meta.items()), "",
             f"**Fit half: {right['fit']} of {len(half['fit'])} right first. Held-back (check) half: "
             f"{right['check']} of {len(half['check'])} right first "
             f"({100 * right['check'] / max(1, len(half['check'])):.0f}%). Healthy look-alikes with a warning: "
             f"{sum(outcome(r) == 'false warning' for r in looks)} of {len(looks)}.**", "",
             *_class_table(rows), "", *_mechanism_table(rows),
             "| variant | half | expected finding | doctor's top finding | outcome | evidence |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        top = row["top"] or ("failed: " + row["error"] if row["error"] else "none")
        evidence = "; ".join(row["evidence"][:3]).replace("|", "/")
        kind = row["half"] + (", look-alike" if row.get("look_alike") else "")
        lines.append(f"| {row['fault']} | {kind} | `{row['expected']}` | `{top}` | {outcome(row)} | {evidence} |")
    return "\n".join(lines) + "\n"
def write_report(out: Path, runs: Sequence[FaultRun], meta: dict[str, Any]) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "doctor-accuracy.json", "markdown": out / "doctor-accuracy.md"}
    rows = [r.row() for r in runs]
    paths["json"].write_text(json.dumps({"meta": meta, "faults": rows}, indent=2) + "\n")
    paths["markdown"].write_text(markdown(rows, meta))
    return paths
