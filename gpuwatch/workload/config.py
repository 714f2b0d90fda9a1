"""What a workload run is: the stage, the model size, the traffic, and the result it reports.

No torch here: the CLI parses and validates a run, and ``gpuwatch validate`` reads results, on machines
without torch.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Stage = Literal["naive", "workers", "batched", "compiled", "bf16"]
Traffic = Literal["steady", "longtail", "bursty"]
Device = Literal["cuda", "cpu"]

#: What a running stage prints on stderr once it is warm; ``gpuwatch validate`` starts sampling then.
READY_LINE = "gpuwatch-workload: ready"

#: The incident's fixes, in the order they were applied; each stage keeps the fixes before it.
STAGES: tuple[Stage, ...] = ("naive", "workers", "batched", "compiled", "bf16")
TRAFFIC: tuple[Traffic, ...] = ("steady", "longtail", "bursty")

STAGE_HELP: dict[str, str] = {
    "naive": "Python preprocessing in the serving thread, one request at a time, a .cuda() copy per request, "
             "dynamic shapes, FP32, eager",
    "workers": "preprocessing moved to N worker processes (a tokeniser with C-level string ops and a word "
               "cache), queues to the GPU loop, which still runs one request at a time",
    "batched": "dynamic batching padded to length buckets (an idle GPU takes what waits at once; while it is "
               "busy a batch leaves when full or after a 5 ms max batch delay; requests queued over 500 ms are "
               "shed), pinned host memory, non-blocking copies, results collected asynchronously",
    "compiled": "CUDA graphs per (bucket, batch size; batches formed while the GPU is busy are cut to a captured "
                "size, so nothing is padded at full load), captured and replayed once before the measured window, "
                "to remove launch overhead (torch.compile on request)",
    "bf16": "BF16 weights and activations with FP32 LayerNorm, softmax and pooling, checked against FP32",
}


@dataclass(frozen=True)
class ModelSize:
    """Shape of the encoder and of the text it is fed."""

    d_model: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    #: Sequence-length buckets requests are padded to; the last is the longest sequence kept.
    buckets: tuple[int, ...]
    max_batch: int
    #: Tokens per batch: long buckets get smaller batches so one batch's memory stays bounded.
    max_batch_tokens: int
    #: Words in a request's document, before truncation to the longest bucket.
    doc_words: tuple[int, int]


SIZES: dict[str, ModelSize] = {
    "tiny": ModelSize(d_model=64, layers=2, heads=4, ffn=256, vocab=4096, buckets=(16, 32, 64),
                      max_batch=32, max_batch_tokens=1024, doc_words=(20, 120)),
    "small": ModelSize(d_model=256, layers=4, heads=8, ffn=1024, vocab=8192, buckets=(32, 64, 128),
                       max_batch=64, max_batch_tokens=4096, doc_words=(200, 1200)),
    "base": ModelSize(d_model=1024, layers=12, heads=16, ffn=4096, vocab=30522, buckets=(64, 128, 256),
                      max_batch=256, max_batch_tokens=16384, doc_words=(1000, 6000)),
}


def default_workers() -> int:
    """Preprocessing processes: all cores but two (the GPU loop and the sampler), at most 12."""
    return max(1, min(12, (os.cpu_count() or 2) - 2))


@dataclass(frozen=True)
class WorkloadConfig:
    stage: Stage = "naive"
    device: Device = "cpu"
    size: str = "tiny"
    duration_s: float = 5.0
    warmup_s: float = 1.0
    traffic: Traffic = "steady"
    io: bool = False
    io_latency_ms: float = 5.0
    cache: bool = False
    workers: int = field(default_factory=default_workers)
    #: Requests in flight at once (the load generator's clients); 0 picks one per stage.
    concurrency: int = 0
    #: Requests per second arriving on a Poisson schedule (open loop); 0: as fast as the server takes them.
    rate: float = 0.0
    #: "graphs" (CUDA graphs), "inductor" (torch.compile) or "none"; "auto" picks graphs on CUDA.
    compiler: str = "auto"
    seed: int = 0
    #: Batched stages: a batch leaves once its oldest request waited this long, full or not (a server's max
    #: batch delay: at light load requests go within a few ms instead of waiting for company).
    max_batch_delay_ms: float = 5.0
    #: Batched stages: a request still queued after this long is shed (answered "overloaded" at once), so a
    #: server past its capacity answers late or not at all instead of queueing for seconds.
    queue_timeout_ms: float = 500.0
    #: A request answered later than this counts as late (the service's latency objective).
    slo_ms: float = 100.0
    #: A phase plan (JSON, see ``phases.Plan``): traffic shapes and offered rates run one after the other in
    #: this process; empty: one window of ``traffic`` at ``rate``.
    plan: str = ""

    def plan_max_rate(self) -> float:
        """The highest rate the plan offers (0 without a plan)."""
        if not self.plan:
            return 0.0
        return max(float(p["rate"]) for p in json.loads(self.plan)["phases"])

    @property
    def model(self) -> ModelSize:
        return SIZES[self.size]

    @property
    def uses_workers(self) -> bool:
        return self.stage != "naive"

    @property
    def batched(self) -> bool:
        return self.stage in ("batched", "compiled", "bf16")

    def caps(self) -> dict[int, int]:
        """Largest batch per length bucket: max_batch, fewer rows for long buckets (a token budget)."""
        size = self.model
        return {b: max(1, min(size.max_batch, size.max_batch_tokens // b)) for b in size.buckets}

    def in_flight(self) -> int:
        """Requests the load generator keeps outstanding: three full batches of the longest bucket (two on
        the GPU, the next one formed behind them). More would only queue: by Little's law every extra
        request in flight adds 1/throughput to the mean latency without adding throughput."""
        if self.concurrency > 0:
            return self.concurrency
        rate = max(self.rate, self.plan_max_rate())
        if rate > 0:  # open loop: the permits only bound memory, a backlog shows as latency
            return max(64, int(rate * 2))
        if self.stage == "naive":
            return 1
        if self.stage == "workers":
            return 2 * self.workers
        return 3 * min(self.caps().values())


@dataclass
class Result:
    """What one run measured. Latency is from a request's arrival to its result being on the host."""

    stage: str
    device: str
    size: str
    traffic: str
    duration_s: float
    requests: int
    req_per_s: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    mean_batch: float | None = None
    #: Requests shed by the queue timeout during the window, and answered ones later than the objective.
    shed: int = 0
    late: int = 0
    #: Share of the window's requests shed or late, percent (None when none finished).
    dropped_pct: float | None = None
    offered_rate: float = 0.0
    #: Under a phase plan: what each phase measured (shape, rate, percentiles, late, passed).
    phases: list[dict[str, Any]] = field(default_factory=list)
    pid: int = 0
    notes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


def percentile(sorted_values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) of already sorted values, linearly interpolated; None when empty."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarise(cfg: WorkloadConfig, latencies_s: list[float], elapsed_s: float, batches: int,
              notes: dict[str, Any], shed: int = 0) -> Result:
    lat = sorted(x * 1000.0 for x in latencies_s)
    n = len(lat)
    late = sum(1 for x in lat if x > cfg.slo_ms)

    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 3)

    return Result(stage=cfg.stage, device=cfg.device, size=cfg.size, traffic=cfg.traffic,
                  duration_s=round(elapsed_s, 3), requests=n,
                  req_per_s=round(n / elapsed_s, 2) if elapsed_s > 0 else 0.0,
                  p50_ms=r(percentile(lat, 50)), p95_ms=r(percentile(lat, 95)), p99_ms=r(percentile(lat, 99)),
                  mean_batch=round(n / batches, 2) if batches else None, shed=shed, late=late,
                  dropped_pct=round(100.0 * (shed + late) / (n + shed), 2) if n + shed else None,
                  offered_rate=cfg.rate, pid=os.getpid(), notes=notes)
