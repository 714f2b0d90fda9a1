"""On a real GPU: a dcgm-exporter page naming this machine's GPU merges into NVML's reading by UUID.

No dcgm-exporter runs on the H200 host, so the page is the reference sample with its first GPU's UUID and
PCI bus id replaced by the real GPU's; the test checks the merge, not DCGM's numbers. Run with ``-m gpu``.
"""

from __future__ import annotations

import time

import pytest

from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sources.dcgm import DcgmSource
from sources.dcgm.exporter import FakeExporter, fixture

pytestmark = pytest.mark.gpu

SAMPLE_UUID = "GPU-5a3c1f2e-8d47-4b9e-a1c3-7f20e6d94b18"


def test_real_nvml_and_dcgm_merge_by_uuid_and_keep_both_profiling_backends(exporter: FakeExporter) -> None:
    from gpuwatch.sources.nvml import NvmlSource

    nvml = NvmlSource(slow_interval=0)
    first = nvml.poll(time.monotonic(), ())
    assert first.gpus, "NVML sees no GPU"
    real = first.gpus[0]
    exporter.serve(fixture("dcgm-exporter-sample.prom").replace(SAMPLE_UUID.encode(), real.uuid.encode()))
    collector = LiveCollector([nvml, DcgmSource(exporter.url)])
    collector.collect()
    time.sleep(1.1)  # a GPM pair more than 100 ms apart
    snap = collector.collect()
    collector.close()
    gpu = snap.gpu(real.index)
    assert gpu is not None and gpu.uuid == real.uuid
    assert "dcgm" in gpu.profiling
    assert gpu.extra.get("DCGM_FI_DEV_XID_ERRORS") == 0.0
    if "gpm" in gpu.profiling:
        assert gpu.prof_source("sm_active") == "gpm"
    assert {s.name: s.state for s in snap.sources} == {"nvml": "ok", "dcgm": "ok"}
