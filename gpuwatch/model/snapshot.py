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
from gpuwatch.model.stacks import StackSample

SCHEMA_VERSION = 1
#: Bytes in a mebibyte: what NVML, DCGM and GPM report memory and rates in before conversion.
MIB = 1 << 20

SourceState = Literal["ok", "stale", "error"]

#: Names of the profiling backends that may fill :class:`Profiling`.
PROFILING_SOURCES = ("gpm", "dcgm")

#: The labels that name a GPU, and a process on a GPU, wherever they are shown: /metrics series, alerts.
GPU_LABELS = ("gpu", "uuid", "name", "hostname")
PROCESS_LABELS = ("pid", "gpu", "user", "command", "hostname")
#: Kubernetes labels of a GPU (from the kubelet) and of the processes on it: empty off Kubernetes.
POD_LABELS = ("namespace", "pod", "container")
#: What sets a process's CPU limit (``ProcessSample.cpu_limit_by``): the host source writes it, the doctor reads it.
CPU_QUOTA = "cgroup quota"
CPU_AFFINITY = "CPU affinity"


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
class ProcessSample:
    """One process using one GPU (a process on two GPUs appears twice, once per ``gpu_index``)."""

    pid: int
    gpu_index: int
    gpu_memory_bytes: int | None = None
    sm_util: float | None = None
    mem_util: float | None = None
    kind: str = "compute"
    ppid: int | None = None
    user: str | None = None
    name: str | None = None
    cmdline: str | None = None
    cpu_percent: float | None = None
    #: CPU percent of one core used by the busiest thread: a GIL-bound loop shows ~100 here.
    top_thread_cpu_percent: float | None = None
    top_thread_id: int | None = None
    num_threads: int | None = None
    #: Threads in uninterruptible sleep (state D): usually waiting on disk or network storage.
    threads_in_io_wait: int | None = None
    rss_bytes: int | None = None
    state: str | None = None
    io_read_bytes_s: float | None = None
    io_write_bytes_s: float | None = None
    container_id: str | None = None
    create_time: float | None = None
    #: Threads runnable or running (state R) at the sample: none for a process that waits off the CPU.
    threads_running: int | None = None
    #: Kernel function the main thread sleeps in (``/proc/PID/wchan``), e.g. ``futex_wait_queue``.
    wait_channel: str | None = None
    #: All bytes read/written by system calls per second (sockets, pipes and page-cache hits too).
    io_read_chars_s: float | None = None
    io_write_chars_s: float | None = None
    #: Child processes without a GPU context (data-loader workers, preprocessing pools).
    workers: int | None = None
    #: Their CPU together, percent of one core, and how many of them used 80 % of a core or more.
    workers_cpu_percent: float | None = None
    workers_busy: int | None = None
    #: Where the process's time goes, thread by thread: the busiest thread first, then the other threads that
    #: used at least 2 % of a core, at most eight. CPU over the last interval, percent of one core.
    thread_cpu_percents: tuple[float, ...] = ()
    #: The same threads' time runnable but waiting for a core (schedstat), percent of the interval; empty
    #: where the kernel keeps no scheduler statistics.
    thread_run_wait_percents: tuple[float, ...] = ()
    #: The same threads' wait class at the sample (``model.thread_wait``: cpu, lock, input, io, sleep, gpu).
    thread_waits: tuple[str, ...] = ()
    #: All the process's threads together: time runnable without a core, percent of one core.
    run_wait_percent: float | None = None
    #: The Kubernetes pod holding the process's GPU (from the kubelet), when one container holds it.
    namespace: str | None = None
    pod: str | None = None
    container: str | None = None
    #: Where its work comes from (``model.feeders.Upstream``): external, tree or unknown; None: not read.
    upstream: str | None = None
    #: Major page faults per second (``/proc/PID/stat`` majflt): pages read from storage on touch (a mapped
    #: file not resident), a wait no read call shows. None: not read (recordings made before it was).
    major_faults_s: float | None = None
    #: The cores it may use where fewer than the host's: its cgroup's CPU quota (a Kubernetes pod's CPU limit)
    #: or its CPU affinity (taskset, a cpuset), whichever is smaller, and which (``cpu_limit_by``: ``CPU_QUOTA``
    #: or ``CPU_AFFINITY``). None: no limit below the host's cores, or not read.
    cpu_limit_cores: float | None = None
    cpu_limit_by: str | None = None
    #: Share of its quota's periods (100 ms by default) in which its cgroup used the quota up and was stopped
    #: until the next one, percent. None: no quota, or not read.
    cpu_throttled_percent: float | None = None
    #: The busiest other processes under that quota (a sidecar, its own workers), each at 10 % of a core or more:
    #: pids, names and CPU (percent of one core), busiest first, at most three.
    cpu_limit_peer_pids: tuple[int, ...] = ()
    cpu_limit_peer_names: tuple[str, ...] = ()
    cpu_limit_peer_cpu_percents: tuple[float, ...] = ()
    #: While it waits on a file lock (flock, fcntl): the process holding that lock (``/proc/locks``) and its name.
    file_lock_holder_pid: int | None = None
    file_lock_holder_name: str | None = None

    @property
    def command(self) -> str:
        """A short name for the process: its name, else the program of its command line, else ""."""
        if self.name:
            return self.name
        return self.cmdline.split()[0].rsplit("/", 1)[-1] if self.cmdline and self.cmdline.split() else ""

    @property
    def command_label(self) -> str:
        """What tells this process apart (``model.command``), seen alone; :meth:`Snapshot.command_labels`
        also names a multiprocessing worker by its parent's script and its place among its siblings."""
        return command_labels([self])[self.pid]

    def identity_labels(self, hostname: str) -> dict[str, str]:
        """:data:`PROCESS_LABELS` with this process's values."""
        return {"pid": str(self.pid), "gpu": str(self.gpu_index), "user": self.user or "",
                "command": self.command, "hostname": hostname}

    def pod_labels(self) -> dict[str, str]:
        """:data:`POD_LABELS` with this process's pod ("" where none is known)."""
        return {"namespace": self.namespace or "", "pod": self.pod or "", "container": self.container or ""}


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
