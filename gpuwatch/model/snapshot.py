"""The Snapshot: one immutable, timestamped picture of the GPUs, their processes and the host.

Every consumer (alerts, doctor, exporter, daemon API, TUI) reads Snapshots and nothing else, so this
module is the contract between the sources and the rest of gpuwatch.

Units are fixed whichever backend filled a field:
  * utilisation and activity: percent, 0-100 (NVML and GPM speak percent; DCGM ratios are scaled)
  * memory: bytes; clocks: MHz; power: watts; energy: joules; temperature: degrees Celsius
  * rates: bytes per second; times: seconds (wall clock, Unix epoch)
A value the backend could not give is ``None``, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpuwatch.model.clock_events import decode
from gpuwatch.model.command import command_labels
from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.health import GpuHealth
from gpuwatch.model.process_sample import POD_LABELS, ProcessSample
from gpuwatch.model.stacks import StackSample

SCHEMA_VERSION = 1
#: Bytes in a mebibyte: what NVML, DCGM and GPM report memory and rates in before conversion.
MIB = 1 << 20

SourceState = Literal["ok", "stale", "error"]

#: Names of the profiling backends that may fill :class:`Profiling`.
PROFILING_SOURCES = ("gpm", "dcgm")

#: The labels that name a GPU wherever it is shown (/metrics series, alerts); a process's are
#: ``process_sample.PROCESS_LABELS``.
GPU_LABELS = ("gpu", "uuid", "name", "hostname")


@dataclass(frozen=True, slots=True)
class Profiling:
    """Profiling counters for one GPU from one backend (GPM via NVML, or DCGM's DCGM_FI_PROF_*).

    These are what GPU-Util hides: GPU-Util says "some kernel ran", SM activity says how many SMs were busy,
    occupancy how full they were, tensor activity whether the tensor cores did the work.
    """

    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    graphics_active: float | None = None
    fp64_active: float | None = None
    fp32_active: float | None = None
    fp16_active: float | None = None
    pcie_tx_bytes_s: float | None = None
    pcie_rx_bytes_s: float | None = None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one instant."""

    index: int
    uuid: str
    name: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    gpu_util: float | None = None
    mem_util: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    mem_reserved_bytes: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    pstate: int | None = None
    clock_event_mask: int | None = None
    clock_events: tuple[str, ...] = ()
    pcie_link_gen: int | None = None
    pcie_link_width: int | None = None
    pcie_tx_bytes_s: float | None = None
    pcie_rx_bytes_s: float | None = None
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    mig_mode: bool | None = None
    #: The GPU fell off the bus (NVML_ERROR_GPU_IS_LOST): identity only, every measurement None, until a restart.
    lost: bool = False
    #: Profiling counters per backend name ("gpm", "dcgm"); both are kept when both exist.
    profiling: dict[str, Profiling] = field(default_factory=dict)
    #: Backend fields the model has no slot for (e.g. DCGM_FI_DEV_XID_ERRORS), in the model's units.
    extra: dict[str, float] = field(default_factory=dict)
    #: Labels the backend attached to this GPU (e.g. Kubernetes pod/namespace/container, MIG instance).
    labels: dict[str, str] = field(default_factory=dict)
    #: XID errors, remapped rows, PCIe replays, HBM temperature, NVLink... read on a slow cadence; None where
    #: the backend reads no health fields (DCGM scrape, older recordings).
    health: GpuHealth | None = None

    def prof(self, metric: str) -> float | None:
        """A profiling metric from the preferred backend (GPM first, then DCGM), or None."""
        for source in PROFILING_SOURCES:
            p = self.profiling.get(source)
            if p is not None:
                value = getattr(p, metric)
                if value is not None:
                    return float(value)
        return None

    def prof_source(self, metric: str) -> str | None:
        """Which backend :meth:`prof` takes ``metric`` from."""
        for source in PROFILING_SOURCES:
            p = self.profiling.get(source)
            if p is not None and getattr(p, metric) is not None:
                return source
        return None

    @property
    def active_clock_events(self) -> frozenset[str]:
        """Clock-event reasons in force: the names a backend gave and the bits of the mask, together.
        Every consumer (doctor, alerts, exporter, TUI) reads this, so they cannot disagree."""
        return frozenset(self.clock_events) | frozenset(decode(self.clock_event_mask))

    @property
    def clock_events_known(self) -> bool:
        """False when no backend said anything about clock events: unknown, which is not "none"."""
        return self.clock_event_mask is not None or bool(self.clock_events)

    @property
    def pcie_tx_rate(self) -> float | None:
        """The best PCIe transmit rate there is: a profiling backend's (GPM or DCGM), else NVML's counter."""
        best = self.prof("pcie_tx_bytes_s")
        return best if best is not None else self.pcie_tx_bytes_s

    @property
    def pcie_rx_rate(self) -> float | None:
        """The best PCIe receive rate (host-to-device copies), chosen as :attr:`pcie_tx_rate` is."""
        best = self.prof("pcie_rx_bytes_s")
        return best if best is not None else self.pcie_rx_bytes_s

    def identity_labels(self, hostname: str) -> dict[str, str]:
        """:data:`GPU_LABELS` with this GPU's values."""
        return {"gpu": str(self.index), "uuid": self.uuid, "name": self.name or "", "hostname": hostname}

    def pod_labels(self) -> dict[str, str]:
        """:data:`POD_LABELS` with the pod holding this GPU ("" where none is known)."""
        return {k: self.labels.get(k, "") for k in POD_LABELS}

    @property
    def mem_used_ratio(self) -> float | None:
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return self.mem_used_bytes / self.mem_total_bytes

    @property
    def sm_active(self) -> float | None:
        return self.prof("sm_active")

    @property
    def sm_occupancy(self) -> float | None:
        return self.prof("sm_occupancy")

    @property
    def tensor_active(self) -> float | None:
        return self.prof("tensor_active")

    @property
    def dram_active(self) -> float | None:
        return self.prof("dram_active")


@dataclass(frozen=True, slots=True)
class HostSample:
    """The machine the GPUs sit in."""

    hostname: str
    cpu_count: int | None = None
    cpu_percent: float | None = None
    iowait_percent: float | None = None
    load1: float | None = None
    load5: float | None = None
    load15: float | None = None
    mem_total_bytes: int | None = None
    mem_used_bytes: int | None = None
    mem_available_bytes: int | None = None
    #: Threads runnable or running on the whole host (``procs_running`` in /proc/stat): more than the cores
    #: means threads queue for a CPU.
    procs_running: int | None = None


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """Health of one source: ``ok``; ``stale`` (no fresh data, e.g. a hung call); ``error`` (failing)."""

    name: str
    state: SourceState = "ok"
    message: str | None = None
    #: Seconds since this source last delivered fresh data (0 when it just did).
    age_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything gpuwatch knows at ``time`` (Unix seconds)."""

    time: float
    host: HostSample
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[ProcessSample, ...] = ()
    sources: tuple[SourceStatus, ...] = ()
    #: Stacks sampled since the last Snapshot that carried them (``model.stacks``); empty on most ticks.
    stacks: tuple[StackSample, ...] = ()
    #: Non-GPU processes that feed the GPU processes (children, siblings, peers of their pipes and sockets).
    feeders: tuple[FeederSample, ...] = ()
    #: Tick counter of the sampler that made it.
    seq: int = 0
    #: "live", or "recording:<name>" when replayed from a file; the UI labels recordings as such.
    origin: str = "live"
    schema: int = SCHEMA_VERSION

    @property
    def is_recording(self) -> bool:
        return self.origin != "live"

    def gpu(self, index: int) -> GpuSample | None:
        for g in self.gpus:
            if g.index == index:
                return g
        return None

    def command_labels(self) -> dict[int, str]:
        """Each process's label by pid (``model.command``): the one every view shows."""
        return command_labels(self.processes, self.feeders)

    def processes_on(self, gpu_index: int) -> tuple[ProcessSample, ...]:
        return tuple(p for p in self.processes if p.gpu_index == gpu_index)

    def source(self, name: str) -> SourceStatus | None:
        for s in self.sources:
            if s.name == name:
                return s
        return None
