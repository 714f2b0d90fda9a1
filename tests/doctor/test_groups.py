"""Grouping identical findings never merges different evidence: one cause on eight GPUs is said once, two
processes doing different things are two findings."""

from __future__ import annotations

from gpuwatch.doctor.groups import group_findings
from gpuwatch.model.finding import Finding


def feeding(gpu: int, pid: int, util: float, core: float) -> Finding:
    return Finding("idle_breakdown", f"GPU idle {100 - util:.0f}% of the window", "warning", 40.0, gpu, pid,
                   (f"pid {pid} (python3), feeding thread {pid}: {core:.0f}% on a core", f"GPU-Util {util:.1f}%"),
                   f"py-spy dump --pid {pid}")


def test_one_loader_feeding_eight_gpus_is_one_group_with_ranges() -> None:
    groups = group_findings([feeding(i, 500 + i, 12.0 + i % 4, 98.0 + i % 2) for i in range(8)])
    assert len(groups) == 1
    assert groups[0].finding.evidence[1] == "GPU-Util 12.0–15.0%"
    assert groups[0].where() == ["GPUs 0, 1, 2, 3, 4, 5, 6, 7", "pids 500, 501, 502, 503, 504, 505, 506, 507"]


def test_two_processes_on_one_gpu_are_never_one_finding() -> None:
    groups = group_findings([feeding(0, 558, 30.0, 100.0), feeding(0, 603, 30.0, 100.0)])
    assert [g.pids for g in groups] == [(558,), (603,)]


def test_a_pegged_process_and_an_idle_one_are_not_merged_into_a_range() -> None:
    groups = group_findings([feeding(0, 558, 30.0, 100.0), feeding(1, 603, 30.0, 0.0)])
    assert len(groups) == 2
    assert all("–" not in e for g in groups for e in g.finding.evidence)
