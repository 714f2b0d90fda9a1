"""What a source is: something that knows one backend and returns a :class:`Reading` when polled.

A source never lets an exception escape for a missing value (that is ``None``); an exception from
``poll`` means the whole backend failed this tick, and the sampler marks it ``error`` and carries on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample


class SourceUnavailable(RuntimeError):
    """The backend cannot be used at all here (no driver, no library): say why and what to do."""


@dataclass
class Reading:
    """What one source saw in one tick. Fields a source does not provide stay ``None``/empty."""

    #: GPUs this source sees. A second GPU source's GPUs are merged into the first's by UUID (index as
    #: a fallback): it fills fields the first left None and adds its profiling, extra fields and labels.
    gpus: tuple[GpuSample, ...] | None = None
    #: Processes on GPUs (from the GPU backend): pid, gpu_index, GPU memory, SM util.
    processes: tuple[ProcessSample, ...] | None = None
    host: HostSample | None = None
    #: Host-side details per pid (user, cmdline, CPU, threads, IO ...), merged into ``processes``.
    process_details: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: Processes that feed the GPU processes (the host source follows their waits): put on the Snapshot.
    feeders: tuple[FeederSample, ...] = ()
    #: Labels for GPUs by UUID (e.g. the Kubernetes pod holding each), added to the merged GPUs and to their
    #: processes; a UUID no GPU source saw is ignored.
    gpu_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Set when the source answered from an old reading (its backend failed since): why. The source is
    #: reported ``stale`` and its reading is still used.
    stale: str | None = None


class Source:
    """Base class for sources. ``role`` orders polling: GPU sources first, then the host source, which is
    given the pids the GPU sources found so it never walks every process on the machine; ``labels``
    sources (Kubernetes) come last and label the GPUs the others found."""

    name: str = "source"
    role: Literal["gpu", "host", "labels"] = "gpu"
    #: Longest a poll may take before the sampler stops waiting and marks the source stale.
    deadline_s: float = 2.0

    def poll(self, now: float, pids: Sequence[int]) -> Reading:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        """Release the backend (NVML handles, HTTP sessions)."""
