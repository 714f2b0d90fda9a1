"""An 8-GPU machine where one cause holds back five GPUs (0, 2, 3, 5, 6: a Python thread at 100 % feeding
each, GPU-Util ~12 %, memory held) and three are busy: the Diagnosis pane, ``gpuwatch doctor`` and the
Alerts pane say the cause once, "GPUs 0, 2, 3, 5, 6: ...", with ranges where the numbers differ."""

from __future__ import annotations

import io
import re

from rich.console import Console

from gpuwatch.alerts import DEFAULT_RULES, AlertEngine, load_rules
from gpuwatch.cli.doctor import render
from gpuwatch.doctor import diagnose
from gpuwatch.doctor.groups import group_findings
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Profiling, Snapshot
from gpuwatch.tui.widgets.alerts_pane import group_alerts, where_text
from gpuwatch.tui.widgets.diagnosis_pane import render_findings

STARVED = (0, 2, 3, 5, 6)
T0 = 1_796_205_600.0
GIB = 2**30


def gpu(i: int, t: int) -> GpuSample:
    starved = i in STARVED
    util = 12.0 + i % 3 if starved else 99.0  # a little different on each starved GPU
    prof = Profiling(sm_active=util * 0.8 if starved else 95.0, sm_occupancy=3.0 if starved else 40.0,
                     tensor_active=0.5 if starved else 60.0, dram_active=2.0 if starved else 40.0)
    return GpuSample(index=i, uuid=f"GPU-{i:04d}", name="NVIDIA H200", gpu_util=util,
                     mem_used_bytes=int(110 * GIB), mem_total_bytes=int(140 * GIB), sm_clock_mhz=1980.0,
                     sm_clock_max_mhz=1980.0, power_w=200.0, power_limit_w=700.0, clock_event_mask=0,
                     profiling={"gpm": prof})


def history(seconds: int = 400) -> list[Snapshot]:
    out = []
    for t in range(seconds):
        procs = tuple(ProcessSample(pid=1000 + i, gpu_index=i, user="svc", name="python3", gpu_memory_bytes=100 * GIB,
                                    cpu_percent=100.0 if i in STARVED else 30.0,
                                    top_thread_cpu_percent=100.0 if i in STARVED else 30.0, top_thread_id=1000 + i)
                      for i in range(8))
        out.append(Snapshot(time=T0 + t, host=HostSample(hostname="node-8", cpu_count=64, cpu_percent=20.0),
                            gpus=tuple(gpu(i, t) for i in range(8)), processes=procs, seq=t + 1))
    return out


def test_the_doctor_finds_the_cause_on_each_starved_gpu_and_the_pane_says_it_once() -> None:
    findings = diagnose(history(30))
    input_bound = [f for f in findings if f.code == "input_cpu_bound"]
    assert sorted(f.gpu_index for f in input_bound) == list(STARVED)  # five raw findings ...
    groups = [g for g in group_findings(findings) if g.finding.code == "input_cpu_bound"]
    assert len(groups) == 1 and groups[0].gpus == STARVED  # ... said once
    text = render_findings(findings, "", {}).plain
    assert text.count("Input pipeline CPU-bound") == 1
    assert "GPUs 0, 2, 3, 5, 6: Input pipeline CPU-bound" in text
    assert "pids 1000, 1002, 1003, 1005, 1006" in text
    # the numbers that differ are ranges over the five GPUs, identifiers are listed
    assert re.search(r"GPU-Util 12(\.0)?–14(\.0)?%", text), text
    assert "pid 1000/1002/1003/1005/1006 (python3)" in text


def test_doctor_text_output_groups_the_same_finding_across_gpus() -> None:
    out = io.StringIO()
    render(diagnose(history(30)), "synthetic 8 GPUs", 30, Console(file=out, soft_wrap=True, highlight=False))
    text = out.getvalue()
    assert text.count("Input pipeline CPU-bound") == 1
    assert re.search(r"\d\. CRITICAL GPUs 0, 2, 3, 5, 6: Input pipeline CPU-bound", text), text


def test_the_same_alert_on_several_gpus_is_one_row() -> None:
    engine = AlertEngine(load_rules([DEFAULT_RULES]))
    for s in history():
        engine.evaluate(s)
    alerts = [a for a in engine.alerts() if a.state in ("firing", "pending")]
    rows = group_alerts(alerts)
    assert len(rows) < len(alerts)  # one row per rule and state instead of one per GPU
    held = [r for r in rows if r.lead.name == "GpuMemoryHeldWhileIdle"]
    assert len(held) == 1 and where_text(held[0]) == "GPUs 0, 2, 3, 5, 6"
    assert where_text(held[0], wide=False) == "0,2,3,5,6"
    threads = [r for r in rows if r.lead.name == "ProcessThreadCpuBound"]
    assert len(threads) == 1 and where_text(threads[0]) == "GPUs 0, 2, 3, 5, 6 pids 1000, 1002, 1003, 1005, 1006"
    assert threads[0].summary().startswith("Process 1000/1002/1003/1005/1006 (python3) on GPU 0/2/3/5/6: its busiest")
