"""Everything /metrics serves, as data: the catalogue's metrics plus the series that are not one reading of
one value (identity, per-reason and per-backend series, sources, alerts, the daemon's own counters).

The exporter builds its families from these specs, ``gpuwatch rules metrics --all`` prints them and the
README's table is generated from them, so a series cannot be served without being documented. Like
dcgm-exporter's counters file, each says gauge or counter outright; nothing is guessed from a name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuwatch.model.causes import CAUSES, OWNER_LABELS, STATES
from gpuwatch.model.dcgm_names import DCGM_FIELDS, DCGM_LABELS
from gpuwatch.model.metrics import METRICS, Kind, MetricSpec
from gpuwatch.model.process_sample import POD_LABELS, PROCESS_LABELS
from gpuwatch.model.snapshot import GPU_LABELS, Profiling

SECTIONS = ("gpu", "dcgm", "process", "host", "source", "alerts", "gpuwatch")
#: The host's name is a label of ``gpuwatch_host_info`` only: elsewhere Prometheus's ``instance`` (the
#: scrape target) tells hosts apart, and a second label saying the same would only add to every series.
HOST_LABEL = "hostname"
#: Every GPU and process series also carries the Kubernetes pod (empty, so absent, off Kubernetes) and a
#: process its container id.
SERIES_GPU_LABELS = (*(n for n in GPU_LABELS if n != HOST_LABEL), *POD_LABELS)
SERIES_PROCESS_LABELS = (*(n for n in PROCESS_LABELS if n != HOST_LABEL), *POD_LABELS, "container_id")
_SCOPE_LABELS: dict[str, tuple[str, ...]] = {"gpu": SERIES_GPU_LABELS, "process": SERIES_PROCESS_LABELS, "host": ()}


@dataclass(frozen=True, slots=True)
class Series:
    """One metric family. ``name`` is what Prometheus stores (a counter's ends in ``_total``); ``labels``
    are the fixed labels (``gpuwatch_gpu_info`` and ``gpuwatch_alerts`` add the backend's and the rules')."""

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]
    section: str

    @property
    def family_name(self) -> str:
        """The name a client library's family takes: a counter's without ``_total``."""
        return self.name.removesuffix("_total") if self.kind == "counter" else self.name


def of_metric(spec: MetricSpec) -> Series:
    assert spec.prom_name is not None
    labels = _SCOPE_LABELS[spec.scope]
    return Series(spec.prom_name, spec.kind, f"{spec.help} ({spec.key})", labels, spec.scope)


def _gpu(name: str, help: str, *extra: str) -> Series:
    return Series(name, "gauge", help, (*SERIES_GPU_LABELS, *extra), "gpu")


def _own(name: str, kind: Kind, help: str, *labels: str) -> Series:
    return Series(name, kind, help, labels, "gpuwatch")


CLOCK_EVENT_ACTIVE = _gpu("gpuwatch_gpu_clock_event_active",
                          "1 while this clock-event (throttle) reason holds the GPU's clocks down", "reason")
PROFILING_FIELDS = tuple(f.name for f in dataclasses.fields(Profiling)
                         if f.name.endswith("_active") or f.name == "sm_occupancy")
PROFILING = {field: _gpu(f"gpuwatch_gpu_profiling_{field}_ratio",
                         f"{field.replace('_', ' ')} as reported by each profiling backend", "source")
             for field in PROFILING_FIELDS}
GPU_INFO = _gpu("gpuwatch_gpu_info", "GPU identity; constant 1 (labels carry the facts)",
                "pci_bus_id", "driver_version")
BACKEND_FIELD = _gpu("gpuwatch_gpu_backend_field", "a backend value without a slot in the model", "field")
GPU_PROCESSES = Series("gpuwatch_gpu_processes", "gauge", "processes using each GPU (before the export cap)",
                       ("gpu",), "process")
HOST_INFO = Series("gpuwatch_host_info", "gauge", "the host's name; constant 1 (join on instance for a host name)",
                   (HOST_LABEL,), "host")
SOURCE_UP = Series("gpuwatch_source_up", "gauge", "1 when the source delivered fresh data this tick", ("source",),
                   "source")
SOURCE_AGE = Series("gpuwatch_source_age_seconds", "gauge", "seconds since the source last delivered fresh data",
                    ("source",), "source")
ALERTS = Series("gpuwatch_alerts", "gauge", "1 for each pending or firing alert (like Prometheus' ALERTS); also "
                "carries the alert's own labels: severity and any the rule sets, and gpu, uuid, name (a GPU "
                "alert), pid, gpu, user, command (a process alert) or source (a stale source)",
                ("alertname", "alertstate"), "alerts")
DIAGNOSIS_FINDING = Series("gpuwatch_diagnosis_finding", "gauge", "1 for each finding of the doctor over the last "
                           "30 s (gpu empty for a host-wide finding), refreshed every exporter.diagnosis_interval",
                           ("code", "severity", "gpu"), "alerts")
UP = _own("gpuwatch_up", "gauge", "1 once the daemon has a snapshot to export")
SNAPSHOT_TIME = _own("gpuwatch_snapshot_timestamp_seconds", "gauge",
                     "when the exported snapshot was taken (recording time for a replay)", "origin")
SNAPSHOT_AGE = _own("gpuwatch_snapshot_age_seconds", "gauge", "seconds since the exported snapshot was taken")
PROCESS_SERIES_DROPPED = _own("gpuwatch_process_series_dropped_total", "counter",
                              "processes left off /metrics per snapshot: younger than "
                              "daemon.process_series_min_age (young) or over daemon.max_process_series (cap)",
                              "reason")
TICK_DURATION = _own("gpuwatch_sampler_tick_duration_seconds", "histogram",
                     "time the sampler took to collect one snapshot (_bucket, _sum and _count series)")
NOTIFICATIONS = _own("gpuwatch_notifications", "gauge", "notifications in the outbox by receiver and state "
                     "(pending, delivered, dead)", "receiver", "state")
NOTIFICATION_ATTEMPTS_FAILED = _own("gpuwatch_notification_attempts_failed_total", "counter",
                                    "delivery attempts that failed")
OUTBOX_WRITE_FAILURES = _own("gpuwatch_outbox_write_failures_total", "counter",
                             "alert transitions or delivery results that could not be written to the outbox "
                             "(kept and retried)")
SNAPSHOTS_SKIPPED = _own("gpuwatch_snapshots_skipped_total", "counter",
                         "snapshots alert evaluation skipped to catch up")
STREAM_SNAPSHOTS_DROPPED = _own("gpuwatch_stream_snapshots_dropped_total", "counter",
                                "snapshots dropped for slow stream clients")
STREAM_CLIENTS = _own("gpuwatch_stream_clients", "gauge", "connected /api/v1/stream clients")
#: dcgm-exporter's GPU series (``[exporter] names = "dcgm"`` or ``"both"``), in its units; see
#: :mod:`gpuwatch.model.dcgm_names` (its counters are served as gauges).
DCGM = {f.name: Series(f.name, "gauge", f"{f.help} (dcgm-exporter name)", (*DCGM_LABELS, *POD_LABELS), "dcgm")
        for f in DCGM_FIELDS}
GPU_SECONDS = Series("gpuwatch_gpu_seconds_total", "counter", "GPU-seconds since the daemon started, by state: "
                     + ", ".join(STATES) + " (allocated: a process holds the GPU; busy: x GPU-Util; effective: "
                     "x SM activity, GPU-Util where there is none); each a part of the one before", ("gpu", "state"),
                     "gpu")
GPU_LOST_SECONDS = Series("gpuwatch_gpu_lost_seconds_total", "counter", "GPU-seconds lost (observed, not "
                          "effective) since the daemon started, by cause (the doctor's finding code, or held_idle, "
                          "no_process, unexplained: " + str(len(CAUSES)) + " in all) and owner (pod, else user "
                          "and command; at most daemon.max_process_series owners, then command (other))",
                          ("gpu", "cause", *OWNER_LABELS), "gpu")
RULES_LOADED = _own("gpuwatch_rules_loaded", "gauge", "alert rules the daemon evaluates (0: no alert can fire)")

#: Every series /metrics can serve, by section.
CATALOGUE: tuple[Series, ...] = tuple(sorted(
    (*(of_metric(m) for m in METRICS.values() if m.prom_name is not None), CLOCK_EVENT_ACTIVE, *PROFILING.values(),
     GPU_INFO, BACKEND_FIELD, GPU_PROCESSES, HOST_INFO, SOURCE_UP, SOURCE_AGE, ALERTS, DIAGNOSIS_FINDING, UP,
     SNAPSHOT_TIME, SNAPSHOT_AGE, PROCESS_SERIES_DROPPED, TICK_DURATION, NOTIFICATIONS, NOTIFICATION_ATTEMPTS_FAILED,
     OUTBOX_WRITE_FAILURES, SNAPSHOTS_SKIPPED, STREAM_SNAPSHOTS_DROPPED, STREAM_CLIENTS, RULES_LOADED,
     GPU_SECONDS, GPU_LOST_SECONDS, *DCGM.values()),
    key=lambda s: (SECTIONS.index(s.section), s.name)))
