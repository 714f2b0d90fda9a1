"""The CPU-limit variants on real signals: ``gpuwatch workload --fault cpu_quota_pool`` (a cgroup quota of two
cores) and ``affinity_pinned_pool`` (pinned to two cores), each under torch's CPU pool of one thread per host
core, recorded by ``gpuwatch validate --doctor`` on an H100 (16 cores, the rest idle). The doctor must name
the limit, not the host and not the code's own work, and point at the function whose threads wait."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.current import window
from gpuwatch.model.recording import load, read_header
from gpuwatch.workload.faults_catalogue import FAULTS

FIXTURES = Path(__file__).parent / "fixtures" / "faults-h100"
RECORDED = sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.ndjson.gz"))
ACCURACY = Path(__file__).parents[2] / "docs" / "doctor-accuracy-h200.json"
WINDOW_S = json.loads(ACCURACY.read_text())["meta"]["window_s"]


def test_the_h100_recordings_are_the_cpu_limit_variants_of_the_catalogue() -> None:
    assert RECORDED == ["affinity_pinned_pool", "cpu_quota_pool"]
    for fault in RECORDED:
        path = FIXTURES / f"{fault}.ndjson.gz"
        assert read_header(path).meta["expected"] == FAULTS[fault].expected
        assert any(g.name.startswith("NVIDIA H100") for g in load(path)[0].gpus)


@pytest.mark.parametrize("fault", RECORDED)
def test_a_process_held_by_its_own_cpu_limit_gets_the_limit_named_first(fault: str) -> None:
    snaps = load(FIXTURES / f"{fault}.ndjson.gz")
    assert snaps[-1].host is not None and (snaps[-1].host.cpu_percent or 100.0) < 50.0  # the host's cores idle
    top = top_problem(diagnose(window(snaps, WINDOW_S)))
    spec = FAULTS[fault]
    assert top is not None and top.code == spec.expected, top
    assert top.title.startswith("CPU limit reached"), top.title
    assert ("cgroup quota" if fault == "cpu_quota_pool" else "CPU affinity") in top.title
    assert top.mechanism == spec.mechanism
    assert any(spec.function in location for location, _ in top.locations[:3]), top.locations
