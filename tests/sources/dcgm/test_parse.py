"""A dcgm-exporter body becomes one record per GPU: identity, who uses it, and its fields."""

from __future__ import annotations

import pytest

from gpuwatch.sources.dcgm.convert import to_gpu_samples
from gpuwatch.sources.dcgm.parse import DcgmParseError, parse_body
from sources.dcgm.exporter import fixture

H100 = fixture("dcgm-exporter-sample.prom").decode()
H200_K8S = fixture("dcgm-exporter-sample-h200-k8s.prom").decode()
GEN_410 = fixture("dcgm-exporter-4.10-h200-k8s.prom").decode()


H100_NAME = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(("body", "expected"), [
    (H100, [(0, "GPU-5a3c1f2e-8d47-4b9e-a1c3-7f20e6d94b18", H100_NAME, "00000000:18:00.0", "570.133.20"),
            (1, "GPU-c0e9b6a4-21f3-4d8a-9e57-3b6d0a8f1c22", H100_NAME, "00000000:2A:00.0", "570.133.20")]),
    (H200_K8S, [(0, "GPU-9e1d7c30-4b2a-4f6e-8c15-d2a7b3e04f91", "NVIDIA H200", "00000000:19:00.0", None),
                (1, "GPU-3f8b21d6-7ac4-49e0-b6d2-15c9e7a0d384", "NVIDIA H200", "00000000:3B:00.0", None)]),
    (GEN_410, [(0, "GPU-9e1d7c30-4b2a-4f6e-8c15-d2a7b3e04f91", "NVIDIA H200", "00000000:19:00.0", "580.95.05"),
               (1, "GPU-3f8b21d6-7ac4-49e0-b6d2-15c9e7a0d384", "NVIDIA H200", "00000000:3B:00.0", "580.95.05")]),
], ids=["h100-Hostname-driver-label", "h200-k8s-hostname", "4.10-system-driver-label"])
def test_identity_comes_from_the_labels_of_every_generation(body: str, expected: list[tuple[object, ...]]) -> None:
    got = [(g.index, g.uuid, g.name, g.pci_bus_id, g.driver_version) for g in parse_body(body)]
    assert got == expected


@pytest.mark.parametrize(("body", "index", "labels"), [
    (H100, 0, {"hostname": "gpu-node-07"}),
    (H200_K8S, 0, {"hostname": "h200-node-03", "pod": "llama-70b-decode-0", "namespace": "inference",
                   "container": "vllm"}),
    (H200_K8S, 1, {"hostname": "h200-node-03"}),
], ids=["Hostname-becomes-hostname", "k8s-pod-on-gpu0", "idle-gpu1-has-no-pod"])
def test_host_and_kubernetes_labels_are_attached_to_their_gpu(body: str, index: int, labels: dict[str, str]) -> None:
    (gpu,) = [g for g in to_gpu_samples(parse_body(body)) if g.index == index]
    assert gpu.labels == labels


MIG = """\
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",modelName="NVIDIA H200",GPU_I_PROFILE="3g.71gb",GPU_I_ID="1",pod="a"} 50
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",modelName="NVIDIA H200",GPU_I_PROFILE="3g.71gb",GPU_I_ID="2",pod="b"} 50
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a",modelName="NVIDIA H200",GPU_I_PROFILE="3g.71gb",GPU_I_ID="1",pod="a"} 0.5
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="NVIDIA H200"} 300
"""


def test_mig_instances_attach_their_ids_profiles_and_pods_to_the_parent_gpu() -> None:
    (gpu,) = to_gpu_samples(parse_body(MIG))
    assert gpu.labels == {"GPU_I_ID": "1,2", "GPU_I_PROFILE": "3g.71gb", "pod": "a,b"}
    assert (gpu.temperature_c, gpu.power_w, gpu.sm_active) == (50.0, 300.0, 50.0)


def test_a_whole_gpu_series_wins_over_a_mig_instance_series() -> None:
    body = MIG + 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 61\n'
    (gpu,) = to_gpu_samples(parse_body(body))
    assert gpu.temperature_c == 61.0


@pytest.mark.parametrize(("body", "expected"), [
    ("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
     'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a"} 5000\n', {"energy_j": 5.0}),
    ('DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} NaN\nDCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} 70\n',
     {"temperature_c": None, "power_w": 70.0}),
    ('DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 40\nDCGM_EXP_XID_ERRORS_COUNT{gpu="0",UUID="GPU-a",xid="31"} 2\n'
     'DCGM_FI_DEV_NVSWITCH_TEMPERATURE{nvswitch="0"} 70\ngo_goroutines 12\n', {"temperature_c": 40.0}),
], ids=["counter-keeps-its-name", "nan-is-missing-not-a-number", "non-gpu-and-non-field-series-are-ignored"])
def test_series_edge_cases(body: str, expected: dict[str, object]) -> None:
    (gpu,) = to_gpu_samples(parse_body(body))
    assert {k: getattr(gpu, k) for k in expected} == expected
    assert not any(k.startswith(("DCGM_EXP", "go_", "DCGM_FI_DEV_NVSWITCH")) for k in gpu.extra)


@pytest.mark.parametrize(("body", "message"), [
    ("", "empty body"),
    ("\n  \n", "empty body"),
    ("<html><body>502 Bad Gateway</body></html>", "not Prometheus text"),
    ("DCGM_FI_DEV_GPU_TEMP{gpu=0} 40", "not Prometheus text"),
    ("node_load1 0.5\nnode_load5 0.4\n", "2 metric families but no DCGM_FI_* series"),
    ('DCGM_FI_DEV_GPU_TEMP{UUID="GPU-a"} 40\n', "1 metric families but no DCGM_FI_* series with a 'gpu' label"),
], ids=["empty-during-reload", "whitespace", "html-error-page", "broken-labels", "node-exporter", "no-gpu-label"])
def test_a_body_that_is_not_a_dcgm_page_is_refused_with_what_was_found(body: str, message: str) -> None:
    with pytest.raises(DcgmParseError, match="^" + message.replace("*", r"\*")):
        parse_body(body)
