"""The doctor's current findings on /metrics: ``gpuwatch_diagnosis_finding{code,severity,gpu}``,
computed off the scrape path by the daemon's publisher over the sampler's history."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.daemon.diagnosis import DiagnosisPublisher
from gpuwatch.data import bundled_recording
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model.recording import iter_snapshots
from gpuwatch.model.snapshot import Snapshot


def test_each_current_finding_is_one_series_with_its_code_severity_and_gpu() -> None:
    history = list(iter_snapshots(bundled_recording()))[:300]
    publisher = DiagnosisPublisher(lambda: history, interval=60)
    publisher.refresh()
    assert publisher.findings, "the bundled incident has findings in its first five minutes"
    body = render(Exporter(SnapshotCollector(lambda: history[-1], findings=lambda: publisher.findings)).registry)
    fam = next(f for f in text_string_to_metric_families(body.decode()) if f.name == "gpuwatch_diagnosis_finding")
    served = {(s.labels["code"], s.labels["severity"], s.labels["gpu"]) for s in fam.samples}
    expected = {(f.code, f.severity, "" if f.gpu_index is None else str(f.gpu_index)) for f in publisher.findings}
    assert served == expected
    assert all(s.value == 1.0 and "hostname" not in s.labels for s in fam.samples)


def test_a_failing_diagnosis_keeps_the_last_findings() -> None:
    history: list[Snapshot] | None = list(iter_snapshots(bundled_recording()))[:300]

    def read() -> list[Snapshot]:
        if history is None:
            raise RuntimeError("broken history")
        return history

    publisher = DiagnosisPublisher(read, interval=60)
    publisher.refresh()
    before = publisher.findings
    history = None
    publisher.refresh()
    assert publisher.findings == before and before and publisher.runs == 2
