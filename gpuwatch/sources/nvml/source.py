"""The NVML source: every GPU's cheap getters each tick, slow ones on a slower cadence, GPM and processes.

Lost GPUs: a GPU that answers NVML_ERROR_GPU_IS_LOST keeps its identity (index, UUID, name, bus id) in
every later reading, with all measurements None and ``lost`` set; it is not polled
again (each call to a lost GPU can block, and NVML handles do not come back without a restart). The
other GPUs go on. Only failures of the whole backend (NVML shut down and not coming back, a driver
upgraded under the process) escape :meth:`NvmlSource.poll`, as :class:`NvmlBackendError`.

Hung calls are the sampler's business: it polls each source on a worker thread with ``deadline_s`` and
marks the source stale while a call hangs (``gpuwatch.sampler.collector``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample
from gpuwatch.sources.base import Reading, Source, SourceUnavailable
from gpuwatch.sources.nvml.binding import import_pynvml
from gpuwatch.sources.nvml.device import Device
from gpuwatch.sources.nvml.errors import ErrorPolicy, GpuLost, NeedsReinit, NvmlBackendError, unavailable_message
from gpuwatch.sources.nvml.gpm import GpmReader
from gpuwatch.sources.nvml.health_worker import HEALTH_INTERVAL_S, HealthWorker
from gpuwatch.sources.nvml.processes import UTIL_MIN_PERIOD_S, ProcessReader

log = logging.getLogger(__name__)


class _Gpu:
    """A device with its GPM pair and process reader."""

    def __init__(self, nvml: Any, device: Device, now: float, util_period_s: float) -> None:
        self.device = device
        self.gpm = GpmReader(nvml, device, now) if not device.lost else None
        self.procs = ProcessReader(nvml, device, util_period_s)


class NvmlSource(Source):
    """GPUs and their processes through NVML (nvidia-ml-py), with GPM profiling where the GPU has it.

    ``slow_interval``: seconds between reads of the slow getters (energy, ECC, MIG mode and, with
    ``pcie_throughput``, NVML's 21 ms PCIe throughput); 0 turns them off. 30 s, dcgm-exporter's own
    collection interval: the energy counter alone costs ~4 ms of CPU a read on an H200 (measured).
    ``health_interval``: seconds between reads of the health fields (remapped rows, PCIe replays, HBM
    temperature, NVLink, fan, encoder/decoder), done with the XID event wait on the health worker's own
    thread, off the tick; 0 turns health and XIDs off. ``clock`` stamps the first GPM sample and must be
    the clock ``poll``'s ``now`` comes from (monotonic, as the sampler uses). ``process_util_period_s``: seconds
    between per-process utilisation queries (about 2 ms of CPU each on an H200, measured; each answer covers
    the span since the last).
    """

    name = "nvml"
    role = "gpu"

    def __init__(self, nvml: Any = None, slow_interval: float = 30.0, deadline_s: float = 2.0, *,
                 pcie_throughput: bool = False, clock: Callable[[], float] = time.monotonic,
                 health_interval: float = HEALTH_INTERVAL_S,
                 process_util_period_s: float = UTIL_MIN_PERIOD_S) -> None:
        self.nvml = nvml if nvml is not None else import_pynvml()
        self.process_util_period_s = process_util_period_s
        self.slow_interval = slow_interval
        self.deadline_s = deadline_s
        self.pcie_throughput = pcie_throughput and slow_interval > 0
        self.policy = ErrorPolicy(self.nvml)
        self._next_slow = -math.inf
        self._closed = False
        #: Held by a poll; close() waits for it briefly so it never frees GPM samples a hung call may
        #: still use once it returns.
        self._busy = threading.Lock()
        self._init()
        try:
            self.gpus = self._open_gpus(clock())
        except Exception:
            self._shutdown()
            raise
        self.health: HealthWorker | None = None
        if health_interval > 0:
            self.health = HealthWorker(self.nvml, [g.device for g in self.gpus], interval=health_interval)
            self.health.open_events()
            self.health.read_health()  # the first reading already has them
            self.health.start()

    # -- lifecycle ---------------------------------------------------------------------------------------
    def _init(self) -> None:
        try:
            self.nvml.nvmlInit()
        except self.policy.catch as exc:
            raise SourceUnavailable(unavailable_message(self.nvml, exc)) from None

    def _open_gpus(self, now: float) -> list[_Gpu]:
        nvml = self.nvml
        try:
            count = nvml.nvmlDeviceGetCount()
            driver = nvml.nvmlSystemGetDriverVersion()
        except self.policy.catch as exc:
            raise SourceUnavailable(unavailable_message(nvml, exc)) from None
        if count == 0:
            raise SourceUnavailable("the NVIDIA driver is loaded but reports no GPUs (check nvidia-smi)")
        driver = driver.decode("utf-8", "surrogateescape") if isinstance(driver, bytes) else str(driver)
        gpus = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except self.policy.catch as exc:
                if getattr(exc, "value", None) == nvml.NVML_ERROR_GPU_IS_LOST:
                    handle = None  # listed as a lost GPU below
                else:
                    log.warning("GPU %d cannot be opened (%s); leaving it out", index, exc)
                    continue
            device = Device(nvml, self.policy, index, handle, driver, pcie_throughput=self.pcie_throughput)
            gpus.append(_Gpu(nvml, device, now, self.process_util_period_s))
        if not gpus:
            raise SourceUnavailable(f"none of the {count} GPUs the NVIDIA driver reports can be opened")
        return gpus

    def _reinit(self, now: float) -> None:
        """NVML was shut down under us (another library in this process): initialise it again, refresh the
        handles and restart GPM, whose samples died with the old session."""
        log.warning("NVML reported it was not initialised; initialising it again")
        errors: tuple[type[BaseException], ...] = (*self.policy.catch, NeedsReinit, GpuLost)
        try:
            self.nvml.nvmlInit()
            for gpu in self.gpus:
                if gpu.device.lost:
                    continue
                gpu.device.handle = self.nvml.nvmlDeviceGetHandleByIndex(gpu.device.index)
                if gpu.gpm is not None:
                    gpu.gpm.close()
                    gpu.gpm.start(now)
        except errors as exc:
            raise NvmlBackendError(f"NVML could not be initialised again ({exc}): restart gpuwatch") from None

    def close(self, wait_s: float = 1.0) -> None:
        """Free the GPM samples and shut NVML down (so the driver can unload or unbind the GPUs).

        If a poll is still hung in NVML after ``wait_s``, nothing is freed: freeing a sample under a call
        that may still use it would be worse than leaving it to the process exit."""
        if self._closed:
            return
        self._closed = True
        if self.health is not None and not self.health.stop():
            log.warning("NVML health worker still inside an NVML call at close; leaving NVML to be released at exit")
            return
        if not self._busy.acquire(timeout=wait_s):
            log.warning("NVML call still running at close; leaving NVML to be released at exit")
            return
        try:
            for gpu in self.gpus:
                if gpu.gpm is not None:
                    gpu.gpm.close()
            self._shutdown()
        finally:
            self._busy.release()

    def _shutdown(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.policy.catch:
            pass

    # -- polling -----------------------------------------------------------------------------------------
    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        with self._busy:
            if self._closed:
                raise NvmlBackendError("the NVML source is closed")
            try:
                return self._poll(now)
            except NeedsReinit:
                self._reinit(now)
            try:
                return self._poll(now)
            except NeedsReinit as exc:
                raise NvmlBackendError(f"NVML keeps reporting it is not initialised ({exc}): "
                                       "restart gpuwatch") from None

    def _poll(self, now: float) -> Reading:
        slow = self.slow_interval > 0 and now >= self._next_slow
        if slow:
            self._next_slow = now + self.slow_interval
        gpus: list[GpuSample] = []
        processes: list[ProcessSample] = []
        health = self.health.latest if self.health is not None else {}
        for gpu in self.gpus:
            device = gpu.device
            if device.lost:
                gpus.append(device.lost_sample(health.get(device.index)))
                continue
            try:
                if slow:
                    device.read_slow()
                values = dict(device.slow_values)
                device.read_tick(now, values)
                profiling = gpu.gpm.read(now) if gpu.gpm is not None else None
                rows = gpu.procs.read(now, values.get("mem_used_bytes"))
            except GpuLost:
                device.mark_lost()
                if gpu.gpm is not None:
                    gpu.gpm.close()
                gpus.append(device.lost_sample(health.get(device.index)))
                continue
            gpus.append(device.sample(values, profiling, health.get(device.index)))
            processes.extend(rows)
        return Reading(gpus=tuple(gpus), processes=tuple(processes))

