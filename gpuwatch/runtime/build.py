"""The one road from options to a running Sampler: every command fills a :class:`SamplingOptions` (from its
flags, or from a Config for the daemon) and calls :func:`open_sampler`, the only place a Sampler is built.

It opens the right producer: a recording, live NVML (+DCGM) and host sources, DCGM alone, the host alone
(``validate`` without a driver), or, where the command allows it and there is no driver, the bundled H200
recording."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from gpuwatch.data import bundled_recording, use_bundled_hint
from gpuwatch.model.interval import DEFAULT_HISTORY_S, DEFAULT_INTERVAL_S, history_capacity
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sampler.history import History
from gpuwatch.sampler.sampler import Producer, Sampler
from gpuwatch.sources.base import Source, SourceUnavailable
from gpuwatch.sources.host import HostSource
from gpuwatch.sources.replay import ReplayProducer
from gpuwatch.sources.stack_source import EVERY_S, StackSource

log = logging.getLogger(__name__)


class NoGpuError(RuntimeError):
    """No NVIDIA driver here and nothing else to sample: the message says what to do."""


@dataclass
class SamplingOptions:
    replay: Path | None = None
    speed: float = 1.0
    loop: bool = False
    interval: float = DEFAULT_INTERVAL_S
    dcgm_url: str | None = None
    #: Play the bundled H200 recording when there is no driver (the dashboard does; ``snapshot`` does not).
    allow_bundled: bool = False
    #: Loop the bundled recording (the dashboard plays it forever; the doctor reads it once).
    loop_bundled: bool = True
    #: Slow NVML getters (PCIe throughput, energy, ECC) every this many seconds; 0 turns them off.
    slow_interval: float = 30.0
    #: Seconds between NVML's per-process utilisation queries (~2 ms of CPU each on an H200; each answer covers
    #: the span since the last, so a longer period gives means over longer spans, never gaps).
    process_util_period: float = 5.0
    #: NVML's own PCIe throughput counter costs ~21 ms a call: off unless asked for (GPM gives PCIe rates).
    nvml_pcie_throughput: bool = False
    #: The kubelet's PodResources socket (the daemon's; None: no pod labels) and how often to ask it.
    kubelet_socket: str | None = None
    kubelet_interval: float = 10.0
    #: No GPU source: sample the host alone instead of failing (``validate --device cpu``).
    host_only: bool = False
    #: Sample the stacks of the processes on under-used GPUs with py-spy (where it is installed and ptrace is
    #: permitted), each process at most once every ``stacks_every_s`` seconds.
    stacks: bool = True
    stacks_every_s: float = EVERY_S
    #: The share of a core the stack sampler may use (None: its default for the pace; 0: no cap, for the fault
    #: recordings whose evidence is the point).
    stacks_budget: float | None = None
    #: The bundled recording starts where its GPU gets busy (the dashboard and the daemon: live views of the
    #: demo), so no window, verdict or GPU-hour comes from the ~10 idle seconds nobody is shown.
    skip_bundled_idle: bool = False
    #: Seconds of snapshots kept (how far back a paused dashboard goes; what a daemon's /api/v1/history serves).
    history_s: float = DEFAULT_HISTORY_S


@dataclass
class Opened:
    """A Sampler over the opened producer (not started: the command starts it or ticks it itself)."""

    sampler: Sampler
    #: What is being shown, in words: "live: 1 GPU via NVML", "recording: h200-incident.ndjson.gz" ...
    description: str
    is_recording: bool

    @property
    def producer(self) -> Producer:
        return self.sampler.producer


def open_sampler(opts: SamplingOptions) -> Opened:
    """Open the sources ``opts`` name and the Sampler over them, at ``opts.interval``."""
    producer, description, is_recording = _open_producer(opts)
    history = History(capacity=history_capacity(opts.history_s, opts.interval))
    return Opened(Sampler(producer, interval=opts.interval, history=history), description, is_recording)


def _gpu_sources(opts: SamplingOptions) -> tuple[list[Source], list[str]]:
    sources: list[Source] = []
    problems: list[str] = []
    try:
        from gpuwatch.sources.nvml import NvmlSource

        sources.append(NvmlSource(slow_interval=opts.slow_interval, pcie_throughput=opts.nvml_pcie_throughput,
                                  process_util_period_s=opts.process_util_period))
    except SourceUnavailable as exc:
        problems.append(str(exc))
    if opts.dcgm_url:
        from gpuwatch.sources.dcgm import DcgmSource

        # keep a tick near --interval even when the exporter hangs
        sources.append(DcgmSource(opts.dcgm_url, read_timeout=min(2.0, opts.interval),
                                  total_timeout=max(0.5, opts.interval)))
    return sources, problems


def _label_sources(opts: SamplingOptions) -> list[Source]:
    """The kubelet source where its socket is; off (one info line) where it is not."""
    if not opts.kubelet_socket:
        return []
    from gpuwatch.sources.kubelet import is_socket

    if not is_socket(opts.kubelet_socket):  # asked before grpc and protobuf are imported: ~10 MiB saved
        log.info("no kubelet PodResources socket at %s: pod labels are off", opts.kubelet_socket)
        return []
    try:
        from gpuwatch.sources.kubelet.source import KubeletSource
    except ImportError as exc:
        log.info("pod labels need grpcio and protobuf (%s is missing): pip install grpcio protobuf (or "
                 "pipx inject gpuwatch-monitor grpcio protobuf)",
                 exc.name)
        return []
    interval = max(1.0, opts.kubelet_interval)
    return [KubeletSource(opts.kubelet_socket, interval=interval, timeout=min(5.0, interval))]


def _open_producer(opts: SamplingOptions) -> tuple[Producer, str, bool]:
    if opts.replay is not None:
        skip = opts.skip_bundled_idle and Path(opts.replay).resolve() == bundled_recording().resolve()
        rp = ReplayProducer(opts.replay, speed=opts.speed, loop=opts.loop, skip_idle=skip)
        return rp, f"recording: {Path(opts.replay).name}{_from(rp)}", True
    gpu_sources, problems = _gpu_sources(opts)
    if gpu_sources:
        names = "+".join(s.name.upper() for s in gpu_sources)
        stacks = StackSource(every_s=opts.stacks_every_s, budget=opts.stacks_budget) if opts.stacks else None
        return (LiveCollector([*gpu_sources, HostSource(), *_label_sources(opts)], stacks=stacks),
                f"live via {names}", False)
    reason = problems[0] if problems else "no GPU source"
    if opts.host_only:
        return (LiveCollector([HostSource()]),
                "live via host only (no NVIDIA driver: GPU columns stay empty)", False)
    if opts.allow_bundled and bundled_recording().exists():
        # said by the description every command prints ("recording (no NVIDIA driver here): ..."), not a log line
        log.info("%s; playing the bundled H200 recording", reason)
        rp = ReplayProducer(bundled_recording(), speed=opts.speed, loop=opts.loop_bundled,
                            skip_idle=opts.skip_bundled_idle)
        return rp, f"recording (no NVIDIA driver here): {bundled_recording().name}{_from(rp)}", True
    raise NoGpuError(f"{reason}. Run it on a machine with an NVIDIA driver, point it at a dcgm-exporter "
                     f"with --dcgm URL, or play a recording with --replay FILE "
                     f"({use_bundled_hint()})")


def _from(rp: ReplayProducer) -> str:
    """`` from 11 s`` where the playback starts past the recording's start (its idle lead-in skipped)."""
    return f" from {rp.skipped_s:.0f} s" if rp.skipped_s else ""
