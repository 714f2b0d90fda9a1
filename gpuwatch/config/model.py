"""The typed configuration: one dataclass per TOML section, each field documented and parsed by
``metadata["parse"]``. ``gpuwatch daemon --print-config`` and the loader both walk these definitions,
so the file format, its validation and its documentation cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwatch.config import fields as f
from gpuwatch.model.interval import DEFAULT_HISTORY_S, DEFAULT_INTERVAL_S, MAX_HISTORY_S, MIN_HISTORY_S, describe_bounds

DEFAULT_PORT = 19464
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
DAY = 86400.0


def _opt(parse: Any, help: str, **kw: Any) -> Any:
    return field(metadata={"parse": parse, "help": help}, **kw)


@dataclass(frozen=True)
class SamplerConfig:
    interval: float = _opt(f.sampling_interval, f"seconds between samples ({describe_bounds()})",
                           default=DEFAULT_INTERVAL_S)
    history: float = _opt(f.duration_between(MIN_HISTORY_S, MAX_HISTORY_S), "how far back the snapshots kept reach "
                          "(/api/v1/history, a connected dashboard going back in time); each costs memory",
                          default=DEFAULT_HISTORY_S)


@dataclass(frozen=True)
class SourcesConfig:
    dcgm_url: str | None = _opt(f.url, "also scrape this dcgm-exporter /metrics URL", default=None)
    kubelet_socket: str = _opt(f.text, "the kubelet's PodResources socket: pod, namespace and container labels "
                               "for each GPU (no socket there: off)",
                               default="/var/lib/kubelet/pod-resources/kubelet.sock")
    kubelet_interval: float = _opt(f.duration, "how often to ask the kubelet which pod holds each GPU",
                                   default=10.0)
    stacks: bool = _opt(f.boolean, "sample the stacks of the processes on under-used GPUs with py-spy (needs "
                        "py-spy and ptrace permission: CAP_SYS_PTRACE)", default=True)


@dataclass(frozen=True)
class ExporterConfig:
    names: str = _opt(f.one_of("gpuwatch", "dcgm", "both"), "GPU series names on /metrics: gpuwatch's, "
                      "dcgm-exporter's (its units and labels, for dashboards and rules written for it), or both",
                      default="gpuwatch")
    diagnosis_interval: float = _opt(f.duration, "how often the doctor's findings on /metrics "
                                     "(gpuwatch_diagnosis_finding) are refreshed (the doctor's window: each "
                                     "snapshot judged once when nobody asks sooner)", default=30.0)


@dataclass(frozen=True)
class AlertsConfig:
    rule_paths: tuple[str, ...] = _opt(f.text_list, "alert rule files (YAML); empty = the shipped rules",
                                       default=())
    #: After a restart, an alert stored as firing that the engine has not re-raised within this time is
    #: notified as resolved (rules with long windows need their history back before they can re-fire).
    resolve_grace: float = _opt(f.duration_between(0, 7 * DAY),
                                "time after a restart before stored firing alerts may resolve", default=300.0)


@dataclass(frozen=True)
class DaemonConfig:
    listen: str = _opt(f.listen_text, "HOST:PORT to serve on", default=DEFAULT_LISTEN)
    allow_remote: bool = _opt(f.boolean, "allow a non-loopback listen address (needs token_file)",
                              default=False)
    token_file: str | None = _opt(f.text, "file holding the bearer token for state-changing requests",
                                  default=None)
    token_for_reads: bool | None = _opt(f.boolean, "reads need the token too (default: only on a non-loopback "
                                        "listen address)", default=None)
    state_dir: str | None = _opt(f.text, "where the outbox database lives (default: $STATE_DIRECTORY or "
                                 "~/.local/state/gpuwatch)", default=None)
    max_process_series: int = _opt(f.int_between(1, 100_000), "most processes exported on /metrics per scrape",
                                   default=256)
    process_series_min_age: float = _opt(f.duration_between(0, 3600), "a process shows on /metrics once it has run "
                                         "this long: short-lived processes would each leave a set of series "
                                         "behind in Prometheus (0: at once)", default=30.0)
    stream_queue: int = _opt(f.int_between(1, 10_000), "snapshots buffered per /api/v1/stream client before the "
                             "oldest is dropped", default=16)
    external_url: str | None = _opt(f.url, "URL receivers should link back to", default=None)
    request_timeout: float = _opt(f.duration_between(0.1, 3600), "a request head must arrive within this time "
                                  "of connecting; also closes idle connections", default=10.0)
    max_connections: int = _opt(f.int_between(1, 1_000_000), "most client connections at once (the oldest idle one "
                                "makes room for a new one)", default=512)
    max_stream_clients: int = _opt(f.int_between(1, 100_000), "most /api/v1/stream clients at once", default=64)


@dataclass(frozen=True)
class NotifyConfig:
    max_age: float = _opt(f.duration_between(1, 30 * DAY), "dead-letter a notification not delivered within this time",
                          default=86400.0)
    initial_backoff: float = _opt(f.duration_between(0.1, 3600), "first retry delay", default=1.0)
    max_backoff: float = _opt(f.duration_between(1, DAY), "longest retry delay (also caps Retry-After)", default=300.0)
    timeout: float = _opt(f.duration_between(0.1, 300), "HTTP timeout per delivery attempt", default=10.0)
    unhealthy_after: float = _opt(f.duration_between(10, 7 * DAY), "/healthz turns unhealthy when a receiver has "
                                  "failed every attempt, or held a pending notification, for this long",
                                  default=900.0)


@dataclass(frozen=True)
class EfficiencyConfig:
    enabled: bool = _opt(f.boolean, "count GPU-seconds allocated, busy, effective and lost by cause into hourly "
                         "roll-ups in the state directory (gpuwatch report) and /metrics", default=True)
    retention: float = _opt(f.duration_between(3600, 366 * DAY), "how long hourly roll-ups are kept (1h to 366d; "
                            "about 0.25 MB a day for 8 GPUs with a few owners each)", default=14 * DAY)
    rollouts: bool = _opt(f.boolean, "notice when a GPU owner's workload changes (new image, pod or command "
                          "line), compare before against after, notify the receivers and keep the verdict "
                          "(GET /api/v1/rollouts, gpuwatch report)", default=True)
    rollout_settle: float = _opt(f.duration_between(1, 3600), "how long a new workload runs before its "
                                 "samples count (warm-up, compilation)", default=120.0)
    rollout_window: float = _opt(f.duration_between(10, 3600), "the most of each workload compared (the new "
                                 "one is judged once steady for a minute, or after this long)", default=600.0)


@dataclass(frozen=True)
class DigestConfig:
    receivers: tuple[str, ...] = _opt(f.text_list, "send the GPU digest (gpuwatch report --format markdown: per owner, "
                                      "GPU-hours allocated and lost by cause, the top fix, the trend, consolidation "
                                      "advice) to these receivers (generic or slack); empty = not sent", default=())
    every: float = _opt(f.duration_between(1, 31 * DAY), "how often (1s to 31d)", default=7 * DAY)
    at: str = _opt(f.day_time, "when, in UTC: \"mon 09:00\" (every a whole number of weeks), \"09:00\" (whole "
                   "days), \"\": every interval counted from 1970-01-01 00:00 UTC", default="mon 09:00")
    window: float | None = _opt(f.duration_between(3600, 31 * DAY), "the hours it covers, compared with as many "
                                "before (default: every)", default=None)
    format: str = _opt(f.one_of("markdown", "json"), "a generic receiver's body carries the digest as markdown "
                       "(text) or as the report's JSON (report); slack always gets the markdown", default="markdown")


#: Receiver kinds: three webhook bodies, and Alertmanager's own API (alerts pushed as Prometheus pushes them).
RECEIVER_KINDS = ("generic", "alertmanager", "slack", "alertmanager_api")
#: Kinds whose receiving end checks no Standard Webhooks signature: a secret is optional (Slack) or refused
#: (Alertmanager's API, where a secret would look like protection it is not).
UNSIGNED_KINDS = ("slack", "alertmanager_api")
ALERTMANAGER_API = "alertmanager_api"
#: Kinds that can take the digest (text): gpuwatch's own webhook body and Slack's.
DIGEST_KINDS = ("generic", "slack")
#: An alertmanager_api receiver re-sends firing alerts this often by default (Prometheus's resend delay), and
#: at most every 2m30s: half of Alertmanager's default resolve_timeout (5m), so one lost request never lets
#: Alertmanager end an alert that is still firing.
AM_RESEND_DEFAULT_S = 60.0
AM_RESEND_RANGE_S = (1.0, 150.0)
#: A webhook's still-firing group is sent again after this long unless ``repeat_interval`` says otherwise.
WEBHOOK_REPEAT_S = 4 * 3600.0
WEBHOOK_REPEAT_RANGE_S = (60.0, 30 * DAY)


@dataclass(frozen=True)
class ReceiverConfig:
    name: str = _opt(f.text, "unique receiver name")
    kind: str = _opt(f.one_of(*RECEIVER_KINDS), "generic, alertmanager or slack: a webhook with that body; "
                     "alertmanager_api: push alerts into an Alertmanager (url = its base URL)")
    url: str = _opt(f.url, "where to POST (alertmanager_api: Alertmanager's URL, e.g. http://alertmanager:9093)")
    secret_file: str | None = _opt(f.text, "file holding the signing secret (whsec_<base64> or raw); needed for "
                                   "generic and alertmanager, optional for slack, none for alertmanager_api",
                                   default=None)
    secret_env: str | None = _opt(f.text, "environment variable holding the signing secret", default=None)
    repeat_interval: float | None = _opt(f.duration, "re-send a still-firing group after "
                                         "this long (webhooks: 1m to 30d, default 4h; alertmanager_api: 1s to "
                                         "2m30s, default 1m, under Alertmanager's resolve_timeout)", default=None)
    group_by: tuple[str, ...] = _opt(f.text_list, "labels that split alerts into notifications",
                                     default=("alertname",))
    send_resolved: bool = _opt(f.boolean, "also notify when alerts resolve (always on for alertmanager_api)",
                               default=True)
    match: dict[str, str] = field(default_factory=dict, metadata={
        "parse": f.string_map, "help": "only alerts whose labels equal these"})

    @property
    def resend_s(self) -> float:
        """Seconds between sends of a still-firing group: the configured interval or the kind's default."""
        if self.repeat_interval is not None:
            return self.repeat_interval
        return AM_RESEND_DEFAULT_S if self.kind == ALERTMANAGER_API else WEBHOOK_REPEAT_S


@dataclass(frozen=True)
class Config:
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    exporter: ExporterConfig = field(default_factory=ExporterConfig)
    efficiency: EfficiencyConfig = field(default_factory=EfficiencyConfig)
    digest: DigestConfig = field(default_factory=DigestConfig)
    receivers: tuple[ReceiverConfig, ...] = ()
    #: The file this came from (None: defaults only).
    path: Path | None = None

    def listen_address(self) -> tuple[str, int]:
        return f.listen_address(self.daemon.listen)


SECTIONS: dict[str, type] = {"sampler": SamplerConfig, "sources": SourcesConfig, "alerts": AlertsConfig,
                             "daemon": DaemonConfig, "notify": NotifyConfig, "exporter": ExporterConfig,
                             "efficiency": EfficiencyConfig, "digest": DigestConfig}
