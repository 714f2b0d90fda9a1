"""One process on one GPU, as the sources saw it in one tick: what NVML says of its GPU use, and what /proc says
of its CPU, threads, waits, I/O and limits. Part of the Snapshot contract (``model.snapshot``); units as there."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.model.command import command_labels

#: The labels that name a process on a GPU wherever it is shown: /metrics series, alerts.
PROCESS_LABELS = ("pid", "gpu", "user", "command", "hostname")
#: Kubernetes labels of a GPU (from the kubelet) and of the processes on it: empty off Kubernetes.
POD_LABELS = ("namespace", "pod", "container")
#: What sets a process's CPU limit (``ProcessSample.cpu_limit_by``): the host source writes it, the doctor reads it.
CPU_QUOTA = "cgroup quota"
CPU_AFFINITY = "CPU affinity"
#: What a process whose main thread sleeps in poll, select or epoll waits for (``ProcessSample.poll_wait``):
#: input another process could send, or only time (an event loop's ``asyncio.sleep``, a select of nothing).
POLL_INPUT = "input"
POLL_TIMER = "timer"


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
    #: Of its CPU, the part spent in the kernel (system time), percent of one core; and minor page faults per
    #: second (pages mapped and zeroed on first touch: memory allocated afresh). None: not read.
    cpu_system_percent: float | None = None
    minor_faults_s: float | None = None
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
    #: While its main thread sleeps in a poll call: ``POLL_INPUT`` or ``POLL_TIMER``. None: not in one, or not read.
    poll_wait: str | None = None
    #: While its main thread is blocked in a write that its wait channel cannot tell from a read (``wait_woken``):
    #: what it writes to (``/dev/pts/3``, ``pipe:[123]``, ``socket:[456]``). None: not in one, or not read.
    write_target: str | None = None

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
