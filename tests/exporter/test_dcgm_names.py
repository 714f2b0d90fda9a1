"""``[exporter] names = "dcgm"``: a dashboard or rule written for dcgm-exporter finds the same series, units and
labels on gpuwatch's /metrics.

The round trip: a real dcgm-exporter page (the samples in tests/sources/dcgm/fixtures) is read into Snapshot GPUs by
the DCGM source's parser, served by the exporter in dcgm mode, and the scrape is compared with the page, field
by field: the same name, the same labels with the same values, the same number in the same unit.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest
from core.factories import full_snapshot
from prometheus_client.parser import text_string_to_metric_families
from tools import require_tool

from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model.dcgm_names import DCGM_FIELDS
from gpuwatch.model.health import GpuHealth
from gpuwatch.model.snapshot import HostSample, Snapshot
from gpuwatch.sources.dcgm.convert import to_gpu_samples
from gpuwatch.sources.dcgm.parse import parse_body

FIXTURES = Path(__file__).resolve().parents[1] / "sources" / "dcgm" / "fixtures"
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]
#: dcgm-exporter default fields gpuwatch has no reading for (NVML calls it does not make).
NOT_READ = {f"DCGM_FI_DEV_{n}" for n in ("NVLINK_BANDWIDTH_TOTAL", "VGPU_LICENSE_STATUS")}
#: Labels gpuwatch does not reproduce: dcgm-exporter's driver label changed name across versions.
NOT_COMPARED = {"DCGM_FI_DRIVER_VERSION", "DCGM_FI_SYSTEM_DRIVER_VERSION", "err_code", "err_msg"}


def scrape(snap: Snapshot, names: str) -> str:
    return render(Exporter(SnapshotCollector(lambda: snap, names=names)).registry).decode()


def series_of(text: str, keep: set[str] | None = None) -> tuple[Series, dict[str, str]]:
    """(name, labels) -> value, and name -> declared type; empty label values dropped as Prometheus does."""
    values: Series = {}
    types: dict[str, str] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            name = s.name.removesuffix("_total") if fam.type == "counter" else s.name
            if keep is not None and name not in keep:
                continue
            types[name] = fam.type
            labels = frozenset((k, v) for k, v in s.labels.items() if v and k not in NOT_COMPARED)
            values[(name, labels)] = s.value
    return values, types


def replayed(fixture: str, hostname_label: str) -> tuple[str, str]:
    """The reference page and gpuwatch's dcgm-mode scrape of the same GPUs, with the Hostname label written
    as the reference writes it."""
    page = (FIXTURES / fixture).read_text()
    hostname = next(v for k, v in (pair.split("=", 1) for pair in page.split("{", 2)[1].split("}")[0].split(","))
                    if k == hostname_label).strip('"')
    snap = Snapshot(time=1.0, host=HostSample(hostname=hostname), gpus=to_gpu_samples(parse_body(page)))
    ours = scrape(snap, "dcgm")
    return page, ours.replace('Hostname="', f'{hostname_label}="')


@pytest.mark.parametrize(("fixture", "hostname_label"), [
    ("dcgm-exporter-sample.prom", "Hostname"),
    ("dcgm-exporter-sample-h200-k8s.prom", "hostname"),
])
def test_every_shared_field_has_the_reference_name_labels_and_value(fixture: str, hostname_label: str) -> None:
    page, ours = replayed(fixture, hostname_label)
    ref, _ = series_of(page)
    got, _ = series_of(ours)
    shared = {name for name, _ in ref} & {f.name for f in DCGM_FIELDS}
    assert {name for name, _ in ref} - shared == NOT_READ
    for name in sorted(shared):
        want = {k: v for k, v in ref.items() if k[0] == name}
        have = {k: v for k, v in got.items() if k[0] == name}
        assert set(have) == set(want), name
        for key, value in want.items():
            assert have[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key


def test_kubernetes_labels_come_from_the_gpu_labels() -> None:
    _, ours = replayed("dcgm-exporter-sample-h200-k8s.prom", "hostname")
    got, _ = series_of(ours, {"DCGM_FI_DEV_GPU_UTIL"})
    pods = {dict(labels).get("pod") for _, labels in got}
    assert pods == {"llama-70b-decode-0", None}


def test_units_are_dcgm_exporters_mib_mhz_percent_and_ratios() -> None:
    snap = full_snapshot()
    gpu = snap.gpus[0]
    got, _ = series_of(scrape(snap, "dcgm"))
    by_name = {name: v for (name, labels), v in got.items() if ("gpu", "0") in labels}
    assert by_name["DCGM_FI_DEV_FB_USED"] == gpu.mem_used_bytes // (1 << 20)
    assert by_name["DCGM_FI_DEV_SM_CLOCK"] == gpu.sm_clock_mhz
    assert by_name["DCGM_FI_DEV_GPU_UTIL"] == gpu.gpu_util
    assert by_name["DCGM_FI_PROF_SM_ACTIVE"] == pytest.approx(gpu.sm_active / 100)
    assert by_name["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == pytest.approx(gpu.energy_j * 1000)


def test_names_choose_which_gpu_series_are_served() -> None:
    snap = full_snapshot()
    dcgm, both, own = (series_of(scrape(snap, n))[1] for n in ("dcgm", "both", "gpuwatch"))
    assert "DCGM_FI_DEV_GPU_UTIL" in dcgm and "gpuwatch_gpu_utilization_ratio" not in dcgm
    assert "DCGM_FI_DEV_GPU_UTIL" in both and "gpuwatch_gpu_utilization_ratio" in both
    assert "DCGM_FI_DEV_GPU_UTIL" not in own and "gpuwatch_gpu_utilization_ratio" in own
    assert "gpuwatch_process_gpu_memory_bytes" in dcgm  # process and host series keep gpuwatch's names


def test_a_dcgm_scrape_passes_promtool_check_metrics_apart_from_dcgm_exporters_own_naming(tmp_path: Path) -> None:
    """promtool's lint objects to dcgm-exporter's camelCase labels (``modelName``, ``UUID``) on the reference
    itself; a dcgm-mode scrape may raise those and nothing else, and must parse."""
    promtool = require_tool("promtool")

    def problems(text: str) -> tuple[int, set[str]]:
        done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        lines = (done.stdout + done.stderr).splitlines()
        return done.returncode, {line.split(" ", 1)[1] for line in lines if " " in line}

    ref_rc, ref_kinds = problems((FIXTURES / "dcgm-exporter-sample.prom").read_text())
    rc, kinds = problems(scrape(full_snapshot(), "dcgm"))
    assert rc in (0, 3) and ref_rc == 3  # 3: lint findings only; 1 would be a parse error
    assert kinds <= ref_kinds, kinds - ref_kinds
    own_rc, own_kinds = problems(scrape(full_snapshot(), "gpuwatch"))
    assert own_rc == 0, own_kinds


def test_health_fields_under_dcgm_names_come_from_nvml_health() -> None:
    snap = full_snapshot()
    health = snap.gpus[0].health
    assert health is not None
    got, _ = series_of(scrape(snap, "dcgm"))
    by_name = {name: v for (name, labels), v in got.items() if ("gpu", "0") in labels}
    assert by_name["DCGM_FI_DEV_XID_ERRORS"] == health.xid_last == 13
    assert by_name["DCGM_FI_DEV_MEMORY_TEMP"] == health.memory_temperature_c
    assert by_name["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"] == health.pcie_replays == 3
    assert by_name["DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"] == health.remapped_rows_correctable == 2
    assert by_name["DCGM_FI_DEV_ROW_REMAP_FAILURE"] == 0.0
    assert by_name["DCGM_FI_DEV_DEC_UTIL"] == health.decoder_util == 1.0


def test_dcgm_xid_errors_is_zero_before_the_first_xid_and_absent_where_xids_are_not_reported() -> None:
    snap = full_snapshot()
    quiet = dataclasses.replace(snap.gpus[0], health=GpuHealth(xid_count=0), extra={})
    blind = dataclasses.replace(snap.gpus[1], health=GpuHealth(pcie_replays=0), extra={})
    got, _ = series_of(scrape(dataclasses.replace(snap, gpus=(quiet, blind)), "dcgm"), {"DCGM_FI_DEV_XID_ERRORS"})
    assert {dict(labels)["gpu"]: v for (_, labels), v in got.items()} == {"0": 0.0}
