"""Health fields and XID events for the fake pynvml: remapped rows, PCIe replays, field values (memory
temperature, NVLink bytes per link), NVLink link states, fan, encoder/decoder, and an NVML event set.

Knobs: the FakeGpu's health fields (``remapped_rows``, ``memory_temp``, ``nvlink_active`` ...), a per-field
return code for field values (``gpu.field_errors[NVML_FI_DEV_MEMORY_TEMP] = NVML_ERROR_NOT_SUPPORTED``),
``xid_supported=False`` (registration answers NotSupported), ``fake.xid(gpu, code)`` (an XID arrives: a
waiting ``nvmlEventSetWait_v2`` returns it) and ``fake.hide(name)`` (an older nvidia-ml-py without ``name``).
"""

from __future__ import annotations

import threading
import types
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pynvml as _real

from .fake_pynvml_gpu import FakeGpu, FakeHandle, nvml_function


@dataclass
class FakeEventSet:
    gpus: set[int] = field(default_factory=set)
    events: deque[tuple[int, int]] = field(default_factory=deque)
    freed: bool = False


class _Absent:
    """A class attribute that is not there: what an older binding lacking the function looks like."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        raise AttributeError(self.name)


class FakeHealthMixin:
    """The health and event functions of :class:`fakes.fake_pynvml.FakeNvml`."""

    gpus: list[FakeGpu]

    def _init_health(self) -> None:
        self.event_sets: list[FakeEventSet] = []
        #: The longest a wait really blocks before answering Timeout: a worker waiting 1 s at a time
        #: would make every test that closes a source wait for it.
        self.event_wait_cap_s = 0.05
        self._event_cond = threading.Condition()

    # -- knobs -------------------------------------------------------------------------------------------
    def xid(self, gpu: int, code: int) -> None:
        """XID ``code`` happens on GPU ``gpu``: every event set it is registered in gets it."""
        with self._event_cond:
            for es in self.event_sets:
                if gpu in es.gpus and not es.freed:
                    es.events.append((gpu, code))
            self._event_cond.notify_all()

    def hide(self, *names: str) -> None:
        """Make this fake look like an nvidia-ml-py without the functions ``names``."""
        self.__class__ = type(f"{type(self).__name__}Older", (type(self),), {n: _Absent() for n in names})

    # -- events ------------------------------------------------------------------------------------------
    @nvml_function()
    def nvmlEventSetCreate(self) -> FakeEventSet:
        es = FakeEventSet()
        self.event_sets.append(es)
        return es

    @nvml_function()
    def nvmlDeviceRegisterEvents(self, handle: FakeHandle, eventTypes: int, eventSet: FakeEventSet) -> None:
        if not self.gpus[handle.index].xid_supported:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        eventSet.gpus.add(handle.index)

    @nvml_function()
    def nvmlEventSetWait_v2(self, eventSet: FakeEventSet, timeoutms: int) -> Any:
        with self._event_cond:
            wait_s = min(timeoutms / 1000, self.event_wait_cap_s)
            if not self._event_cond.wait_for(lambda: bool(eventSet.events), timeout=wait_s):
                raise _real.NVMLError(_real.NVML_ERROR_TIMEOUT)
            gpu, code = eventSet.events.popleft()
        return types.SimpleNamespace(device=FakeHandle(gpu), eventType=_real.nvmlEventTypeXidCriticalError,
                                     eventData=code, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)

    @nvml_function()
    def nvmlEventSetFree(self, eventSet: FakeEventSet) -> None:
        eventSet.freed = True

    @nvml_function()
    def nvmlDeviceGetIndex(self, handle: FakeHandle) -> int:
        return handle.index

    # -- health getters ----------------------------------------------------------------------------------
    @nvml_function()
    def nvmlDeviceGetRemappedRows(self, device: FakeHandle) -> tuple[int, int, int, int]:
        return self.gpus[device.index].remapped_rows

    @nvml_function()
    def nvmlDeviceGetPcieReplayCounter(self, handle: FakeHandle) -> int:
        return self.gpus[handle.index].pcie_replays

    @nvml_function()
    def nvmlDeviceGetFanSpeed(self, handle: FakeHandle) -> int:
        return self.gpus[handle.index].fan_speed

    @nvml_function()
    def nvmlDeviceGetEncoderUtilization(self, handle: FakeHandle) -> list[int]:
        return [self.gpus[handle.index].encoder_util, 167_000]

    @nvml_function()
    def nvmlDeviceGetDecoderUtilization(self, handle: FakeHandle) -> list[int]:
        return [self.gpus[handle.index].decoder_util, 167_000]

    @nvml_function()
    def nvmlDeviceGetNvLinkState(self, device: FakeHandle, link: int) -> int:
        active = self.gpus[device.index].nvlink_active
        if not active:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(active):
            raise _real.NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        return _real.NVML_FEATURE_ENABLED if active[link] else _real.NVML_FEATURE_DISABLED

    @nvml_function()
    def nvmlDeviceGetFieldValues(self, handle: FakeHandle, fieldIds: list[Any]) -> Any:
        g = self.gpus[handle.index]
        values = (_real.c_nvmlFieldValue_t * len(fieldIds))()
        for i, fid in enumerate(fieldIds):
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            v = values[i]
            v.fieldId, v.scopeId, v.nvmlReturn = fid, scope, g.field_errors.get(fid, _real.NVML_SUCCESS)
            if fid == _real.NVML_FI_DEV_MEMORY_TEMP:
                v.valueType, v.value.uiVal = _real.NVML_VALUE_TYPE_UNSIGNED_INT, g.memory_temp
            elif fid in (_real.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, _real.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX):
                kib = g.nvlink_tx_kib if fid == _real.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX else g.nvlink_rx_kib
                v.valueType, v.value.ullVal = _real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, kib[scope]
            else:
                v.nvmlReturn = _real.NVML_ERROR_NOT_SUPPORTED
        return values
