"""Write deploy/grafana/gpuwatch.json, the Grafana dashboard for gpuwatch's exporter, from one table.

The exporter names its GPU series gpuwatch's way, dcgm-exporter's way or both (``[exporter] names``). Each GPU
query here is written once per naming and joined with ``or on (instance, gpu)``: under "gpuwatch" or "both" the
gpuwatch series answer, under "dcgm" the dcgm-exporter series do (brought to the same units), and no GPU is
drawn twice. Process, alert and finding series have one name in every mode. A reading with no dcgm-exporter
name (NVLink traffic) says so in its panel's description.

    python scripts/grafana_dashboard.py           # rewrite the dashboard
    python scripts/grafana_dashboard.py --check   # exit 1 if the file differs from what this writes
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwatch.model.clock_events import CLOCK_EVENT_BITS

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "gpuwatch.json"
GPU_SELECTOR = '{instance=~"$instance", gpu=~"$gpu"}'
HOST_SELECTOR = '{instance=~"$instance"}'
MIB = " * 1048576"  # dcgm-exporter serves memory in MiB
MHZ = " * 1000000"  # and clocks in MHz
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@dataclass(frozen=True)
class Target:
    """One query: gpuwatch's PromQL and, for GPU series, dcgm-exporter's (None: no such name)."""

    legend: str
    gpuwatch: str
    dcgm: str | None = None
    #: labels a GPU's series share under both names: what ``or`` matches on
    on: tuple[str, ...] = ("instance", "gpu")
    table: bool = False

    def expr(self) -> str:
        gw = self.gpuwatch.replace("{sel}", GPU_SELECTOR).replace("{host}", HOST_SELECTOR)
        if self.dcgm is None:
            return gw
        dcgm = self.dcgm.replace("{sel}", GPU_SELECTOR)
        return f"{_group(gw)} or on ({', '.join(self.on)}) {_group(dcgm)}"


def _group(expr: str) -> str:
    """``expr`` in parentheses unless it is one selector (``or`` binds loosest; the parentheses say so)."""
    return f"({expr})" if " " in expr.replace(", ", ",") else expr


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    unit: str
    targets: tuple[Target, ...]
    kind: str = "timeseries"
    width: int = 12
    extra_defaults: dict[str, Any] = field(default_factory=dict)


def _gauge(gw: str, dcgm: str, scale: str = "") -> tuple[str, str]:
    """A GPU gauge under both names; ``scale`` (" / 100", " * 1048576") takes dcgm-exporter's unit to gpuwatch's."""
    return f"{gw}{{sel}}", f"{dcgm}{{sel}}{scale}"


def _clock_events_dcgm() -> str:
    """dcgm-exporter serves the reasons as one bit mask, gpuwatch one series per reason: decode the mask bit by
    bit into the same ``reason`` labels (PromQL has no bitwise operators: floor(mask / bit) % 2)."""
    parts = [f'label_replace(floor(DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{sel}} / {bit}) % 2, "reason", "{name}", "", "")'
             for bit, (name, _) in sorted(CLOCK_EVENT_BITS.items())]
    return " or ".join(parts)


def _jitter(series: str, scale: str = "") -> str:
    """How far the series swung over the last minute."""
    swing = f"max_over_time({series}{{sel}}[1m]) - min_over_time({series}{{sel}}[1m])"
    return f"({swing}){scale}" if scale else swing


ROWS: tuple[tuple[str, tuple[Panel, ...]], ...] = (
    ("Is the GPU working, or only busy?", (
        Panel("GPU-Util beside SM activity", "GPU-Util says some kernel ran; SM activity says how many SMs did the "
              "work. A wide gap is a GPU that looks busy and is not.", "percentunit", (
                  Target("GPU-Util gpu {{gpu}}", *_gauge("gpuwatch_gpu_utilization_ratio", "DCGM_FI_DEV_GPU_UTIL",
                                                         " / 100")),
                  Target("SM active gpu {{gpu}}", *_gauge("gpuwatch_gpu_sm_active_ratio", "DCGM_FI_PROF_SM_ACTIVE")),
              ), extra_defaults={"min": 0, "max": 1}),
        Panel("Occupancy, tensor and DRAM activity", "Warps resident per SM, tensor-core pipe and memory bandwidth "
              "against their peaks (GPM on Hopper, or DCGM).", "percentunit", (
                  Target("occupancy gpu {{gpu}}", *_gauge("gpuwatch_gpu_sm_occupancy_ratio",
                                                          "DCGM_FI_PROF_SM_OCCUPANCY")),
                  Target("tensor gpu {{gpu}}", *_gauge("gpuwatch_gpu_tensor_active_ratio",
                                                       "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")),
                  Target("DRAM gpu {{gpu}}", *_gauge("gpuwatch_gpu_dram_active_ratio", "DCGM_FI_PROF_DRAM_ACTIVE")),
              ), extra_defaults={"min": 0, "max": 1}),
    )),
    ("Memory, power and clocks", (
        Panel("Device memory and its jitter", "Memory in use, and how far it swung over the last minute: a steady "
              "climb is a leak, a sawtooth is an allocator at work.", "bytes", (
                  Target("used gpu {{gpu}}", *_gauge("gpuwatch_gpu_memory_used_bytes", "DCGM_FI_DEV_FB_USED", MIB)),
                  Target("total gpu {{gpu}}", *_gauge("gpuwatch_gpu_memory_total_bytes", "DCGM_FI_DEV_FB_TOTAL",
                                                      MIB)),
                  Target("jitter (1m range) gpu {{gpu}}", _jitter("gpuwatch_gpu_memory_used_bytes"),
                         _jitter("DCGM_FI_DEV_FB_USED", MIB)),
              )),
        Panel("Power against its limit", "Draw and the enforced limit.", "watt", (
            Target("draw gpu {{gpu}}", *_gauge("gpuwatch_gpu_power_watts", "DCGM_FI_DEV_POWER_USAGE")),
            Target("limit gpu {{gpu}}", *_gauge("gpuwatch_gpu_power_limit_watts", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT")),
        )),
        Panel("Clocks", "SM and memory clocks, and the SM clock's maximum.", "hertz", (
            Target("SM gpu {{gpu}}", *_gauge("gpuwatch_gpu_sm_clock_hertz", "DCGM_FI_DEV_SM_CLOCK", MHZ)),
            Target("SM max gpu {{gpu}}", *_gauge("gpuwatch_gpu_sm_clock_max_hertz", "DCGM_FI_DEV_MAX_SM_CLOCK", MHZ)),
            Target("memory gpu {{gpu}}", *_gauge("gpuwatch_gpu_memory_clock_hertz", "DCGM_FI_DEV_MEM_CLOCK", MHZ)),
        )),
        Panel("Clock-event reasons", "1 while the reason holds the clocks down (power cap, thermal, idle ...).",
              "short", (
                  Target("{{reason}} gpu {{gpu}}", "gpuwatch_gpu_clock_event_active{sel}", _clock_events_dcgm(),
                         on=("instance", "gpu", "reason")),
              ), kind="state-timeline"),
    )),
    ("PCIe and NVLink", (
        Panel("PCIe traffic", "Host-to-device (receive) and device-to-host (transmit) bytes per second.", "Bps", (
            Target("receive gpu {{gpu}}", "rate(gpuwatch_gpu_pcie_receive_bytes_total{sel}[$__rate_interval])",
                   "DCGM_FI_PROF_PCIE_RX_BYTES{sel}"),
            Target("transmit gpu {{gpu}}", "rate(gpuwatch_gpu_pcie_transmit_bytes_total{sel}[$__rate_interval])",
                   "DCGM_FI_PROF_PCIE_TX_BYTES{sel}"),
        )),
        Panel("NVLink traffic", "Bytes per second sent and received over all of the GPU's NVLink links. Served "
              "under gpuwatch's names (names = \"gpuwatch\" or \"both\"); with names = \"dcgm\" gpuwatch has no "
              "dcgm-exporter NVLink series, so this panel stays empty. A GPU without NVLink has no series.", "Bps", (
                  Target("transmit gpu {{gpu}}",
                         "rate(gpuwatch_gpu_nvlink_transmit_bytes_total{sel}[$__rate_interval])"),
                  Target("receive gpu {{gpu}}",
                         "rate(gpuwatch_gpu_nvlink_receive_bytes_total{sel}[$__rate_interval])"),
              )),
    )),
    ("Processes and pods", (
        Panel("GPU memory by process", "Device memory each process holds, by pod where the kubelet says which pod "
              "holds the GPU.", "bytes", (
                  Target("{{namespace}}/{{pod}} {{command}} {{pid}}", "sum by (namespace, pod, container, pid, "
                         "command) (gpuwatch_process_gpu_memory_bytes{sel})"),
              )),
        Panel("Busiest-thread CPU by process", "CPU of each process's busiest thread (1 = one core): near 1 with an "
              "idle GPU is a GIL-bound input pipeline.", "percentunit", (
                  Target("{{namespace}}/{{pod}} {{command}} {{pid}}", "max by (namespace, pod, container, pid, "
                         "command) (gpuwatch_process_top_thread_cpu_usage_ratio{sel})"),
              )),
    )),
    ("Alerts and the doctor", (
        Panel("Alerts", "Alerts gpuwatch's own engine holds, pending or firing.", "short", (
            Target("", "sum by (alertname, alertstate, severity, gpu) (gpuwatch_alerts{host})", table=True),
        ), kind="table"),
        Panel("The doctor's findings", "What the doctor concludes from the last 30 s: each finding by code and "
              "severity (gpuwatch doctor explains each with its evidence and fix).", "short", (
                  Target("", "max by (code, severity, gpu) (gpuwatch_diagnosis_finding{host})", table=True),
              ), kind="table"),
    )),
)


def _target(ref: str, t: Target) -> dict[str, Any]:
    out: dict[str, Any] = {"refId": ref, "expr": t.expr(), "legendFormat": t.legend, "datasource": DATASOURCE}
    if t.table:
        out.update(format="table", instant=True)
    return out


def _variable(name: str, label: str, query: str, sort: int) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
            "query": {"query": query, "refId": name}, "definition": query, "includeAll": True, "multi": True,
            "allValue": ".*", "current": {}, "refresh": 2, "sort": sort}


def dashboard() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (schema 39)."""
    panels: list[dict[str, Any]] = []
    y = 0
    for title, row in ROWS:
        panels.append({"type": "row", "title": title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "id": len(panels) + 1, "panels": []})
        y += 1
        x = 0
        for p in row:
            if x + p.width > 24:
                x, y = 0, y + 8
            panels.append({
                "type": p.kind, "title": p.title, "description": p.description, "id": len(panels) + 1,
                "datasource": DATASOURCE, "gridPos": {"h": 8, "w": p.width, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": p.unit, **p.extra_defaults}, "overrides": []},
                "targets": [_target(chr(ord("A") + i), t) for i, t in enumerate(p.targets)]})
            x += p.width
        y += 8
    # The GPU list from whichever names the exporter serves: gpuwatch_gpu_info, or dcgm-exporter's GPU-Util.
    gpus = 'label_values({__name__=~"gpuwatch_gpu_info|DCGM_FI_DEV_GPU_UTIL", instance=~"$instance"}, gpu)'
    return {
        "title": "gpuwatch: GPUs, what they do and why",
        "uid": "gpuwatch-gpus",
        "description": "gpuwatch's exporter in any names mode (gpuwatch, dcgm, both): GPU-Util beside the work SMs "
                       "really do, memory, power and clocks, PCIe and NVLink, processes by pod, alerts and the "
                       "doctor's findings. Generated by scripts/grafana_dashboard.py.",
        "tags": ["gpu", "nvidia", "gpuwatch"],
        "editable": True, "graphTooltip": 1, "refresh": "30s", "schemaVersion": 39,
        "time": {"from": "now-1h", "to": "now"}, "timezone": "", "version": 1,
        "annotations": {"list": []}, "links": [],
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1},
            _variable("instance", "Host", "label_values(gpuwatch_host_info, instance)", 1),
            _variable("gpu", "GPU", gpus, 3),
        ]},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the shipped file is not what this writes")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if DASHBOARD.read_text(encoding="utf-8") != text:
            print(f"{DASHBOARD.relative_to(ROOT)} is stale: run python scripts/grafana_dashboard.py", file=sys.stderr)
            return 1
        return 0
    DASHBOARD.write_text(text, encoding="utf-8")
    print(f"wrote {DASHBOARD.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
