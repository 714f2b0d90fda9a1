"""One GPU as the NVML source sees it: its handle, its identity (read once), its getters, and what NVML
said it will never answer (remembered per getter, so a tick does not ask again)."""

from __future__ import annotations

import logging
import math
from typing import Any

from gpuwatch.model.health import GpuHealth
from gpuwatch.model.snapshot import GpuSample, Profiling
from gpuwatch.sources.nvml.errors import Action, ErrorPolicy, GpuLost
from gpuwatch.sources.nvml.getters import (
    RARE_EVERY_S,
    Getter,
    Values,
    fast_getters,
    mig_getter,
    rare_getters,
    slow_getters,
)

log = logging.getLogger(__name__)

#: Label set on a GPU that answered NVML_ERROR_GPU_IS_LOST: its identity stays, its measurements are None.


def _keep(result: Any, values: Values) -> None:
    """For getters whose result the caller uses directly."""


def once(key: str, fn: Any, *args: Any) -> Getter:
    """A getter called directly through :meth:`Device.call` (identity, processes, GPM)."""
    return Getter(key, fn, args, _keep)


def _text(value: Any) -> str:
    """NVML's bytes as text; a byte that is not UTF-8 kept (as a surrogate, made visible by the collector)."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


class Device:
    def __init__(self, nvml: Any, policy: ErrorPolicy, index: int, handle: Any, driver_version: str | None,
                 *, pcie_throughput: bool = False) -> None:
        self.nvml = nvml
        self.policy = policy
        self.catch = policy.catch
        self.index = index
        self.handle = handle
        self.fast = fast_getters(nvml)
        self.slow = slow_getters(nvml, pcie_throughput=pcie_throughput)
        self.rare = rare_getters(nvml)
        #: Slow-cadence values, carried from one slow read to the next.
        self.slow_values: Values = {}
        #: Rare values, carried between their reads; when they are next due, and the pstate they were read at.
        self.rare_values: Values = {}
        self._rare_due = -math.inf
        self._rare_pstate: Any = None
        self.lost = False
        self.identity: dict[str, Any] = {"index": index, "uuid": f"nvml-index-{index}",
                                         "driver_version": driver_version}
        try:
            if handle is None:  # the driver lists it but it was lost before we could open it
                raise GpuLost(f"GPU {index}")
            self._read_identity()
        except GpuLost:
            self.mark_lost()

    def _read_identity(self) -> None:
        nvml = self.nvml
        uuid = self.call(once("uuid", nvml.nvmlDeviceGetUUID))
        if uuid is not None:
            self.identity["uuid"] = _text(uuid)
        name = self.call(once("name", nvml.nvmlDeviceGetName))
        pci = self.call(once("pci_info", nvml.nvmlDeviceGetPciInfo))
        max_sm = self.call(once("sm_clock_max", nvml.nvmlDeviceGetMaxClockInfo, nvml.NVML_CLOCK_SM))
        self.identity.update(name=None if name is None else _text(name),
                             pci_bus_id=None if pci is None else _text(pci.busId),
                             sm_clock_max_mhz=None if max_sm is None else float(max_sm))
        self.read([mig_getter(nvml)], self.slow_values)  # MIG mode: read at start, then on the slow cadence

    # -- calling NVML ------------------------------------------------------------------------------------
    def call(self, g: Getter) -> Any:
        """``g``'s raw result, or None when NVML has no answer (the error handled as :mod:`errors` says)."""
        if g.off is not None:
            return None
        try:
            return g.fn(self.handle, *g.args)
        except self.catch as exc:
            return self.failed(g, exc)

    def failed(self, g: Getter, exc: BaseException) -> Any:
        """React to ``g`` raising ``exc``: switch to the older API and retry it, stop asking, or raise
        GpuLost / NeedsReinit / NvmlBackendError. Returns the older API's result, or None."""
        action = self.policy.action(exc)
        if action is Action.OLDER_API and g.fallback is not None:
            g.fn, g.args, g.apply = g.fallback
            g.fallback = None
            return self.call(g)
        if action in (Action.STOP_ASKING, Action.OLDER_API):
            g.off = type(exc).__name__
            log.debug("GPU %d: %s answered %s; not asking again", self.index, g.key, g.off)
            return None
        self.policy.raise_for_backend(exc)
        return None  # anything else: missing this tick, asked again next tick

    def read(self, getters: list[Getter], values: Values) -> int:
        """Call each getter NVML still answers and convert its result into ``values``. The hot loop. Returns
        how many gave no value this time though NVML may answer them later."""
        handle = self.handle
        missed = 0
        for g in getters:
            if g.off is not None:
                continue
            try:
                result = g.fn(handle, *g.args)
            except self.catch as exc:
                result = self.failed(g, exc)
                if result is None:
                    missed += g.off is None
                    continue
            g.apply(result, values)
        return missed

    def read_tick(self, now: float, values: Values) -> None:
        """This tick's getters into ``values``: the cheap ones, and the rare ones when due (every
        ``RARE_EVERY_S``, or the performance state changed) or carried from their last read. A rare read
        that missed a value is made again next tick, as an every-tick read would have been."""
        self.read(self.fast, values)
        pstate = values.get("pstate")
        if now >= self._rare_due or pstate != self._rare_pstate:
            rare: Values = {}
            missed = self.read(self.rare, rare)
            self.rare_values, self._rare_pstate = rare, pstate
            self._rare_due = now if missed else now + RARE_EVERY_S
        values.update(self.rare_values)

    def read_slow(self) -> None:
        values: Values = {}
        self.read(self.slow, values)
        self.slow_values = values

    # -- building samples --------------------------------------------------------------------------------
    def sample(self, values: Values, gpm: Profiling | None, health: GpuHealth | None = None) -> GpuSample:
        return GpuSample(**self.identity, **values, profiling={"gpm": gpm} if gpm is not None else {},
                         health=health)

    def mark_lost(self) -> None:
        if not self.lost:
            log.warning("GPU %d (%s) is lost (NVML_ERROR_GPU_IS_LOST): no longer polled until gpuwatch restarts",
                        self.index, self.identity["uuid"])
        self.lost = True

    def lost_sample(self, health: GpuHealth | None = None) -> GpuSample:
        """Identity, ``lost``, and the health the worker last had (an XID 79 comes with a lost GPU)."""
        return GpuSample(**self.identity, lost=True, health=health)
