"""A fake ``pynvml`` for tests and benchmarks: the functions gpuwatch calls, over GPUs held in Python objects.

Only the functions are faked. Constants, ctypes structures and the ``NVMLError`` hierarchy (with ``.value``
and the subclasses pynvml generates, ``NVMLError_NotSupported`` ...) are the real ones from the installed
nvidia-ml-py, so ``except pynvml.NVMLError_GpuIsLost`` means the same thing here as on a GPU machine.

Knobs: values settable per GPU (``fake.gpus[0].temperature = 90``), per-call error injection
(``fake.inject("nvmlDeviceGetTemperature", NVML_ERROR_NOT_SUPPORTED, gpu=0)``), missing driver symbols
(``missing={"nvmlDeviceGetCurrentClocksEventReasons"}``), a getter that blocks until released
(``fake.hang(...)``), a lost GPU (``fake.lose_gpu(1)``), NVML shut down under us (``fake.uninitialize()``),
call counts (``fake.calls``), XIDs and older bindings (:mod:`.fake_pynvml_health`), the C functions called
directly (:mod:`.fake_pynvml_native`)
and scale (``make_fake_nvml(gpus=8, processes_per_gpu=256)``).
"""

from __future__ import annotations

import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pynvml as _real

from .fake_pynvml_gpm import FakeGpmMixin
from .fake_pynvml_gpu import FakeClock, FakeGpu, FakeHandle, FakeProcess, default_gpm, nvml_function
from .fake_pynvml_health import FakeHealthMixin
from .fake_pynvml_native import FakeNativeMixin

__all__ = ["FakeClock", "FakeGpu", "FakeNvml", "FakeProcess", "make_fake_nvml"]


@dataclass
class _Injected:
    error: int | BaseException | type[BaseException]
    gpu: int | None
    times: int | None


class FakeNvml(FakeGpmMixin, FakeHealthMixin, FakeNativeMixin):
    """The module-like object ``NvmlSource(nvml=...)`` takes; build it with :func:`make_fake_nvml`."""

    def __init__(self, gpus: list[FakeGpu], *, driver_version: str = "580.159.04",
                 missing: Iterable[str] = (), init_error: int | None = None) -> None:
        self.gpus = gpus
        self.driver_version = driver_version
        self.missing = set(missing)
        self.init_error = init_error
        self.calls: Counter[str] = Counter()
        #: name -> the arguments of its latest call (handle included)
        self.last_args: dict[str, tuple[Any, ...]] = {}
        self.refcount = 0
        self.now_us: Callable[[], int] = lambda: int(time.time() * 1e6)
        self._init_gpm()
        self._init_health()
        self._init_native()
        self._injected: dict[str, list[_Injected]] = {}
        self._hangs: dict[tuple[str, int | None], threading.Event] = {}

    # -- knobs -------------------------------------------------------------------------------------------
    def inject(self, name: str, error: int | BaseException | type[BaseException], *, gpu: int | None = None,
               times: int | None = None) -> None:
        """Make ``name`` raise ``error`` (an NVML_ERROR_* code or an exception) on ``gpu`` (all when None),
        ``times`` times (always when None)."""
        self._injected.setdefault(name, []).append(_Injected(error, gpu, times))

    def clear(self, name: str | None = None) -> None:
        if name is None:
            self._injected.clear()
        else:
            self._injected.pop(name, None)

    def hang(self, name: str, *, gpu: int | None = None) -> threading.Event:
        """Make ``name`` block until the returned Event is set (as a wedged GSP RPC would)."""
        event = threading.Event()
        self._hangs[(name, gpu)] = event
        return event

    def release(self) -> None:
        for event in self._hangs.values():
            event.set()
        self._hangs.clear()

    def lose_gpu(self, index: int) -> None:
        self.gpus[index].lost = True

    def uninitialize(self) -> None:
        """Someone else in the process called nvmlShutdown down to refcount 0."""
        self.refcount = 0

    @property
    def initialized(self) -> bool:
        return self.refcount > 0

    # -- the gate every faked call passes ----------------------------------------------------------------
    def _enter(self, name: str, symbol: str, versioned: str | None, handle: Any) -> None:
        self.calls[name] += 1
        gpu = handle.index if isinstance(handle, FakeHandle) else None
        if symbol in self.missing:
            raise _real.NVMLError(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        if versioned is not None and versioned in self.missing:
            raise _real.NVMLLibraryMismatchError(f"{name}: use a versioned function such as {name}_v2")
        event = self._hangs.get((name, gpu)) or self._hangs.get((name, None))
        if event is not None:
            event.wait()
        if not self.initialized and name not in ("nvmlInit", "nvmlGpmSampleAlloc", "nvmlGpmSampleFree"):
            raise _real.NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        for inj in self._injected.get(name, []):
            if inj.gpu in (None, gpu) and (inj.times is None or inj.times > 0):
                if inj.times is not None:
                    inj.times -= 1
                if isinstance(inj.error, int):
                    raise _real.NVMLError(inj.error)
                raise inj.error
        if gpu is not None and self.gpus[gpu].lost:
            raise _real.NVMLError(_real.NVML_ERROR_GPU_IS_LOST)

    def _gpu(self, handle: FakeHandle) -> FakeGpu:
        return self.gpus[handle.index]

    def __getattr__(self, name: str) -> Any:
        """Constants, structures and exception classes come from the real pynvml; functions do not, so a
        call the fake does not implement fails loudly instead of reaching for a driver."""
        value = getattr(_real, name)
        if isinstance(value, types.FunctionType):
            raise AttributeError(f"fake pynvml does not implement {name}")
        return value

    # -- library and system ------------------------------------------------------------------------------
    @nvml_function("nvmlInitWithFlags")
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise _real.NVMLError(self.init_error)
        self.refcount += 1

    @nvml_function()
    def nvmlShutdown(self) -> None:
        self.refcount = max(0, self.refcount - 1)

    @nvml_function()
    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver_version

    @nvml_function("nvmlDeviceGetCount_v2")
    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    @nvml_function("nvmlDeviceGetHandleByIndex_v2")
    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        if not 0 <= index < len(self.gpus):
            raise _real.NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        if self.gpus[index].lost:
            raise _real.NVMLError(_real.NVML_ERROR_GPU_IS_LOST)
        return FakeHandle(index)

    # -- identity ----------------------------------------------------------------------------------------
    @nvml_function()
    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        return self._gpu(handle).name

    @nvml_function()
    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        return self._gpu(handle).uuid

    @nvml_function("nvmlDeviceGetPciInfo_v3")
    def nvmlDeviceGetPciInfo(self, handle: FakeHandle) -> Any:
        info = _real.nvmlPciInfo_t()
        info.busId = self._gpu(handle).pci_bus_id
        return info

    @nvml_function()
    def nvmlDeviceGetMaxClockInfo(self, handle: FakeHandle, type: int) -> int:
        g = self._gpu(handle)
        return g.sm_clock_max if type == _real.NVML_CLOCK_SM else g.mem_clock_max

    @nvml_function()
    def nvmlDeviceGetMigMode(self, device: FakeHandle) -> list[int]:
        return [int(self._gpu(device).mig_mode), int(self._gpu(device).mig_mode)]

    # -- cheap getters -----------------------------------------------------------------------------------
    @nvml_function()
    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> Any:
        u = _real.c_nvmlUtilization_t()
        u.gpu, u.memory = self._gpu(handle).util_gpu, self._gpu(handle).util_mem
        return u

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version: int | None = None) -> Any:
        symbol = "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo"
        self._enter("nvmlDeviceGetMemoryInfo", symbol, None, handle)
        g = self._gpu(handle)
        used = g.mem_used
        if not version:  # the v1 struct folds the driver's reservation into "used"
            m = _real.c_nvmlMemory_t()
            m.total, m.used, m.free = g.mem_total, used + g.mem_reserved, g.mem_total - used - g.mem_reserved
            return m
        if version != _real.nvmlMemory_v2:
            raise _real.NVMLError(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        m2 = _real.c_nvmlMemory_v2_t()
        m2.version, m2.total, m2.reserved = version, g.mem_total, g.mem_reserved
        m2.used, m2.free = used, g.mem_total - used - g.mem_reserved
        return m2

    @nvml_function()
    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        return self._gpu(handle).temperature

    @nvml_function()
    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        return self._gpu(handle).power_mw

    @nvml_function()
    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        return self._gpu(handle).power_limit_mw

    @nvml_function()
    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, type: int) -> int:
        g = self._gpu(handle)
        return g.sm_clock if type == _real.NVML_CLOCK_SM else g.mem_clock

    @nvml_function()
    def nvmlDeviceGetPerformanceState(self, handle: FakeHandle) -> int:
        return self._gpu(handle).pstate

    @nvml_function()
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeHandle) -> int:
        return self._gpu(handle).clock_reasons

    @nvml_function()
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeHandle) -> int:
        return self._gpu(handle).clock_reasons

    @nvml_function()
    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: FakeHandle) -> int:
        return self._gpu(handle).pcie_gen

    @nvml_function()
    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: FakeHandle) -> int:
        return self._gpu(handle).pcie_width

    # -- slow getters ------------------------------------------------------------------------------------
    @nvml_function()
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeHandle) -> int:
        return self._gpu(handle).energy_mj

    @nvml_function()
    def nvmlDeviceGetTotalEccErrors(self, handle: FakeHandle, errorType: int, counterType: int) -> int:
        g = self._gpu(handle)
        return g.ecc_corrected if errorType == _real.NVML_MEMORY_ERROR_TYPE_CORRECTED else g.ecc_uncorrected

    @nvml_function()
    def nvmlDeviceGetPcieThroughput(self, device: FakeHandle, counter: int) -> int:
        g = self._gpu(device)
        return g.pcie_tx_kbs if counter == _real.NVML_PCIE_UTIL_TX_BYTES else g.pcie_rx_kbs

    # -- processes ---------------------------------------------------------------------------------------
    def _procs(self, handle: FakeHandle, kind: str) -> list[Any]:
        return [_real.nvmlFriendlyObject({"pid": p.pid, "usedGpuMemory": p.used_memory,
                                          "gpuInstanceId": 0xFFFFFFFF, "computeInstanceId": 0xFFFFFFFF})
                for p in self._gpu(handle).processes if kind in p.kind]

    @nvml_function("nvmlDeviceGetComputeRunningProcesses_v3", versioned="nvmlDeviceGetComputeRunningProcesses_v3")
    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        return self._procs(handle, "compute")

    @nvml_function()
    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: FakeHandle) -> list[Any]:
        return self._procs(handle, "compute")

    @nvml_function("nvmlDeviceGetGraphicsRunningProcesses_v3", versioned="nvmlDeviceGetGraphicsRunningProcesses_v3")
    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        return self._procs(handle, "graphics")

    @nvml_function()
    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: FakeHandle) -> list[Any]:
        return self._procs(handle, "graphics")

    @nvml_function()
    def nvmlDeviceGetProcessUtilization(self, handle: FakeHandle, timeStamp: int) -> list[Any]:
        """One sample per process with non-zero utilisation, stamped now; like pynvml, "nothing newer than
        timeStamp" raises NVMLError_NotFound."""
        now = self.now_us()
        busy = [p for p in self._gpu(handle).processes if (p.sm_util or p.mem_util)]
        if not busy or now <= timeStamp:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_FOUND)
        out = []
        for p in busy:
            s = _real.c_nvmlProcessUtilizationSample_t()
            s.pid, s.timeStamp, s.smUtil, s.memUtil = p.pid, now, p.sm_util, p.mem_util
            out.append(s)
        return out


def make_fake_nvml(gpus: int = 1, processes_per_gpu: int = 4, gpm: bool = True, *,
                   missing: Iterable[str] = (), init_error: int | None = None,
                   driver_version: str = "580.159.04") -> FakeNvml:
    """A fake NVML with ``gpus`` H200-like GPUs under a BF16 load (values from the H200 probe log), each
    with ``processes_per_gpu`` compute processes (pids unique across GPUs)."""
    devices = []
    for i in range(gpus):
        procs = [FakeProcess(pid=10_000 + 1000 * i + j, used_memory=(1 + j) * 2**28,
                             sm_util=max(0, 60 - 10 * j), mem_util=max(0, 20 - 5 * j))
                 for j in range(processes_per_gpu)]
        devices.append(FakeGpu(index=i, gpm_supported=gpm, gpm=default_gpm() if gpm else {}, processes=procs))
    return FakeNvml(devices, driver_version=driver_version, missing=missing, init_error=init_error)
