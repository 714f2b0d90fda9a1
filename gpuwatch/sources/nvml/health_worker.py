"""The NVML health worker: one daemon thread per NVML source that collects XID events and reads the slow
health fields, so neither costs the sampler's tick anything.

Cadence: the health fields (:mod:`.health`) every ``interval`` seconds (10 s by default: remapped rows,
replays, HBM temperature and NVLink change rarely); XID events every ``xid_poll_s`` (2 s), through an NVML
event set (``nvmlEventSetCreate`` + ``nvmlDeviceRegisterEvents(nvmlEventTypeXidCriticalError)``) that
queues them in between: each round asks ``nvmlEventSetWait_v2`` with no timeout until it answers Timeout
(nothing queued). The thread sleeps between rounds on a Python event that :meth:`HealthWorker.stop` sets,
so stopping is immediate. Waiting 0.5 s at a time cost 0.25 ms of CPU a second on the H200 and 0.45 on a
development VM (about 0.1 ms a wake-up; the health reads themselves ~0.02 ms/s): one wake-up every 2 s
costs a quarter of that, and an XID still reaches the Snapshot within 2 s (a lost GPU shows on the tick
itself). The tick only takes :attr:`HealthWorker.latest`, a dict swapped whole on every change.

A GPU that cannot register for XID events (NotSupported, NoPermission, an older binding) has its XID
fields None; one whose health reads fail with GpuLost or the like keeps its last values (the tick marks
it lost). Nothing here raises into the sampler.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuwatch.model.health import XID_RECENT_S, GpuHealth
from gpuwatch.sources.nvml.device import Device
from gpuwatch.sources.nvml.errors import GpuLost, NeedsReinit, NvmlBackendError
from gpuwatch.sources.nvml.getters import Values
from gpuwatch.sources.nvml.health import HealthReader

log = logging.getLogger(__name__)

HEALTH_INTERVAL_S = 10.0
#: Longest single wait for an XID event (``wait_events`` clamps to it); the rounds ask with none.
EVENT_WAIT_S = 0.5
#: Seconds between the rounds that collect queued XID events: how late an XID may reach the Snapshot.
#: 2 s: within two ticks at the default interval, a quarter of the wake-ups of waiting 0.5 s at a time.
XID_POLL_S = 2.0
#: Events taken in one round at most: a storm of XIDs cannot keep the worker from its health reads.
MAX_EVENTS_PER_ROUND = 256


@dataclass
class _Xid:
    count: int = 0
    last: int | None = None
    time: float | None = None


class HealthWorker:
    """Health fields and XID errors of ``devices``; :meth:`start` runs :meth:`step` on a daemon thread."""

    def __init__(self, nvml: Any, devices: Sequence[Device], *, interval: float = HEALTH_INTERVAL_S,
                 wait_s: float = EVENT_WAIT_S, xid_poll_s: float = XID_POLL_S,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.nvml = nvml
        self.devices = {d.index: d for d in devices}
        self.catch = devices[0].catch if devices else (Exception,)
        self.readers = {d.index: HealthReader(nvml, d) for d in devices if not d.lost}
        self.interval = interval
        self.wait_s = wait_s
        self.xid_poll_s = xid_poll_s
        self.clock = clock
        self.wall = wall
        #: GPU index -> its latest health; replaced whole, so a reader on another thread sees one version.
        self.latest: dict[int, GpuHealth] = {}
        self._values: dict[int, Values] = {}
        self._xids: dict[int, _Xid] = {}
        self._event_set: Any = None
        self._next_read = -float("inf")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wait_failed = False

    # -- XID events --------------------------------------------------------------------------------------
    def open_events(self) -> None:
        """Create the event set and register every GPU that can report XIDs."""
        nvml = self.nvml
        if getattr(nvml, "nvmlEventSetCreate", None) is None or getattr(nvml, "nvmlEventSetWait_v2", None) is None:
            log.info("XID errors not available (this nvidia-ml-py has no NVML event sets); left out")
            return
        try:
            self._event_set = nvml.nvmlEventSetCreate()
        except self.catch as exc:
            log.info("XID errors not available (nvmlEventSetCreate: %s); left out", exc)
            return
        for index, device in self.devices.items():
            if device.lost:
                continue
            try:
                nvml.nvmlDeviceRegisterEvents(device.handle, nvml.nvmlEventTypeXidCriticalError, self._event_set)
            except self.catch as exc:
                log.info("GPU %d: XID errors not available (%s); left out", index, type(exc).__name__)
                continue
            self._xids.setdefault(index, _Xid())  # a reopened set keeps the counts
        if not self._xids:
            self._free_events()

    def wait_events(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` (at most ``wait_s``) for one XID event and record it; True when one came.
        Sleeps when there is no event set."""
        timeout_s = min(timeout_s, self.wait_s)
        if self._event_set is None:
            self._stop.wait(timeout_s)
            return False
        try:
            data = self.nvml.nvmlEventSetWait_v2(self._event_set, max(0, int(timeout_s * 1000)))
        except self.catch as exc:
            if getattr(exc, "value", None) == self.nvml.NVML_ERROR_TIMEOUT:
                self._wait_failed = False  # no XID in the time: the normal answer
            else:
                if not self._wait_failed:
                    log.warning("waiting for XID events failed (%s); reopening the event set every %.0f s",
                                exc, self.interval)
                self._wait_failed = True  # NVML re-initialised under us, say: a new set at the next read
                self._stop.wait(timeout_s)  # no busy loop while NVML refuses
            return False
        self._wait_failed = False
        if int(data.eventType) & int(self.nvml.nvmlEventTypeXidCriticalError):
            self.record_xid(self._index_of(data.device), int(data.eventData))
        return True

    def drain_events(self) -> None:
        """Record every event NVML queued since the last round, asking with no timeout (never blocks)."""
        if self._event_set is None:
            return
        for _ in range(MAX_EVENTS_PER_ROUND):
            if not self.wait_events(0.0):
                return

    def _index_of(self, handle: Any) -> int | None:
        try:
            return int(self.nvml.nvmlDeviceGetIndex(handle))
        except self.catch:
            return None

    def record_xid(self, index: int | None, code: int) -> None:
        xid = self._xids.get(index) if index is not None else None
        if xid is None:
            log.warning("XID %d from a GPU gpuwatch does not watch", code)
            return
        xid.count += 1
        xid.last, xid.time = code, self.wall()
        log.warning("GPU %d: XID %d", index, code)
        self.publish()

    def _free_events(self) -> None:
        if self._event_set is not None:
            try:
                self.nvml.nvmlEventSetFree(self._event_set)
            except self.catch:
                pass
            self._event_set = None

    # -- health fields -----------------------------------------------------------------------------------
    def read_health(self) -> None:
        for index, reader in self.readers.items():
            if self.devices[index].lost:
                continue
            try:
                self._values[index] = reader.read()
            except (GpuLost, NeedsReinit, NvmlBackendError):
                continue  # the tick deals with the GPU or the backend; keep the last values
        self.publish()

    def publish(self) -> None:
        now = self.wall()
        latest = {}
        for index in self.devices:
            values = dict(self._values.get(index, {}))
            xid = self._xids.get(index)
            if xid is not None:
                fresh = xid.last is not None and xid.time is not None and now - xid.time < XID_RECENT_S
                recent = xid.last if fresh else 0
                values.update(xid_count=xid.count, xid_last=xid.last, xid_last_time=xid.time, xid_recent=recent)
            if values:
                latest[index] = GpuHealth(**values)
        self.latest = latest

    def _xid_expired(self) -> bool:
        now = self.wall()
        return any(h.xid_recent and h.xid_last_time is not None and now - h.xid_last_time >= XID_RECENT_S
                   for h in self.latest.values())

    # -- the thread --------------------------------------------------------------------------------------
    def step(self) -> None:
        """One round, never blocking: the health fields when due, then the XID events queued since the last."""
        now = self.clock()
        if now >= self._next_read:
            self._next_read = now + self.interval
            if self._wait_failed and self._xids:
                self._free_events()
                self.open_events()
            self.read_health()
        elif self._xid_expired():
            self.publish()
        self.drain_events()

    def pause_s(self) -> float:
        """How long the thread sleeps after a round: until the next XID round or health read."""
        return max(0.0, min(self.xid_poll_s, self._next_read - self.clock()))

    def start(self) -> None:
        self._next_read = self.clock() + self.interval  # the caller has just read once
        self._thread = threading.Thread(target=self._run, name="gpuwatch-nvml-health", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # a bug here must not kill health reporting silently, nor spin
                log.exception("NVML health worker failed; retrying in %.0f s", self.interval)
                self._stop.wait(self.interval)
                continue
            self._stop.wait(self.pause_s())

    def stop(self, timeout_s: float | None = None) -> bool:
        """Stop the thread; True once it has ended (at once between rounds, within ``wait_s`` inside an NVML
        wait, later only if NVML hangs), and then the event set is freed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.wait_s + 1.0 if timeout_s is None else timeout_s)
            if self._thread.is_alive():
                return False
        self._free_events()
        return True
