"""Facts derived from a sample are computed once, on the model, so every consumer reads the same answer."""

from __future__ import annotations

import dataclasses

from core.factories import full_snapshot
from gpuwatch.model.alert import Alert
from gpuwatch.model.clock_events import encode, ordered
from gpuwatch.model.finding import Finding
from gpuwatch.model.process_sample import PROCESS_LABELS, ProcessSample
from gpuwatch.model.snapshot import GPU_LABELS, GpuSample, Profiling


def test_active_clock_events_are_the_union_of_names_and_mask_bits_and_unknown_is_not_none() -> None:
    gpu = GpuSample(0, "GPU-0", clock_event_mask=encode(["power_cap"]), clock_events=("sw_thermal",))
    assert gpu.active_clock_events == {"power_cap", "sw_thermal"} and gpu.clock_events_known
    assert ordered(gpu.active_clock_events) == ("power_cap", "sw_thermal")  # NVML's bit order
    assert GpuSample(0, "GPU-0", clock_event_mask=0).clock_events_known
    assert not GpuSample(0, "GPU-0").clock_events_known


def test_the_best_pcie_rate_is_a_profiling_backends_else_nvmls() -> None:
    nvml_only = GpuSample(0, "GPU-0", pcie_rx_bytes_s=1e9, pcie_tx_bytes_s=2e9)
    assert (nvml_only.pcie_rx_rate, nvml_only.pcie_tx_rate) == (1e9, 2e9)
    with_gpm = dataclasses.replace(nvml_only, profiling={"gpm": Profiling(pcie_rx_bytes_s=5e9)})
    assert (with_gpm.pcie_rx_rate, with_gpm.pcie_tx_rate) == (5e9, 2e9)


def test_a_process_is_labelled_by_its_name_else_its_program() -> None:
    assert ProcessSample(1, 0, name="python3", cmdline="/usr/bin/python3 serve.py").command == "python3"
    assert ProcessSample(1, 0, cmdline="/opt/venv/bin/torchrun --nproc 8 train.py").command == "torchrun"
    assert ProcessSample(1, 0, cmdline="   ").command == ProcessSample(1, 0).command == ""


def test_identity_labels_follow_the_published_label_names() -> None:
    snap = full_snapshot()
    gpu, proc = snap.gpus[0], snap.processes[0]
    assert tuple(gpu.identity_labels("h")) == GPU_LABELS and gpu.identity_labels("h")["uuid"] == gpu.uuid
    assert tuple(proc.identity_labels("h")) == PROCESS_LABELS and proc.identity_labels("h")["pid"] == str(proc.pid)


def test_findings_and_alerts_sort_worst_severity_first() -> None:
    def finding(code: str, severity: str, score: float) -> Finding:
        return Finding(code, code, severity, score, 0, None, (), "")  # type: ignore[arg-type]

    ranked = sorted([finding("a", "info", 90), finding("b", "critical", 10), finding("c", "warning", 50),
                     finding("d", "critical", 60)], key=lambda f: f.rank_key)
    assert [f.code for f in ranked] == ["d", "b", "c", "a"]

    def alert(name: str, state: str, severity: str) -> Alert:
        return Alert(name, name, {"severity": severity}, {}, state)  # type: ignore[arg-type]

    alerts = [alert("w", "firing", "warning"), alert("p", "pending", "critical"), alert("c", "firing", "critical"),
              alert("r", "resolved", "critical"), alert("x", "firing", "")]
    assert [a.name for a in sorted(alerts, key=lambda a: a.rank_key)] == ["c", "w", "x", "p", "r"]
