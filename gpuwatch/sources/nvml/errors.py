"""What an NVML error means for the sampler: one place that turns pynvml's exceptions into actions.

pynvml raises one ``NVMLError`` subclass per ``nvmlReturn_t`` code (``.value`` holds the code). The source
reacts per code, as ``reference/nvml-reference.md`` section 4 lays out:

* NotSupported / NoPermission: the answer will not change; remember it per (GPU, getter), stop asking.
* FunctionNotFound / ArgumentVersionMismatch / pynvml's NVMLLibraryMismatchError: the driver is older
  than the binding; use the getter's older API if it has one, else stop asking.
* GpuIsLost: the GPU fell off the bus; stop polling it, keep its identity and mark it lost.
* Uninitialized: someone shut NVML down under us; initialise again once.
* LibRmVersionMismatch: the driver changed under this process; only a restart helps.
* anything else (Unknown, Timeout ...): this value is missing this tick; ask again next tick.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class NvmlBackendError(RuntimeError):
    """The whole NVML backend failed this tick: the sampler marks the source ``error`` with this message."""


class GpuLost(Exception):
    """Raised inside a poll when a GPU answers NVML_ERROR_GPU_IS_LOST; the source marks that GPU lost."""


class NeedsReinit(Exception):
    """Raised inside a poll when NVML says it is not initialised; the source initialises and retries once."""


class Action(Enum):
    STOP_ASKING = "stop_asking"
    OLDER_API = "older_api"
    GPU_LOST = "gpu_lost"
    REINIT = "reinit"
    RESTART = "restart"
    RETRY_NEXT_TICK = "retry_next_tick"


RESTART_MESSAGE = ("the NVIDIA driver changed under this process (NVML library/kernel module version mismatch, "
                   "usually a driver upgrade): restart gpuwatch, and reboot if nvidia-smi fails too")


class ErrorPolicy:
    """Maps a pynvml exception to an :class:`Action`, using the error codes of the module in use (the real
    pynvml or a fake)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml_error: type[BaseException] = nvml.NVMLError
        self.mismatch_error: type[BaseException] = getattr(nvml, "NVMLLibraryMismatchError", self.nvml_error)
        #: What a getter may raise: ``except policy.catch`` in the hot loop.
        self.catch: tuple[type[BaseException], ...] = (self.nvml_error, self.mismatch_error)
        self._by_code: dict[int, Action] = {
            nvml.NVML_ERROR_NOT_SUPPORTED: Action.STOP_ASKING,
            nvml.NVML_ERROR_NO_PERMISSION: Action.STOP_ASKING,
            nvml.NVML_ERROR_FUNCTION_NOT_FOUND: Action.OLDER_API,
            nvml.NVML_ERROR_GPU_IS_LOST: Action.GPU_LOST,
            nvml.NVML_ERROR_UNINITIALIZED: Action.REINIT,
            nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: Action.RESTART,
        }
        argument_version = getattr(nvml, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", None)
        if argument_version is not None:
            self._by_code[argument_version] = Action.OLDER_API
        #: Codes meaning "no samples since the timestamp you gave" for the per-process utilisation call;
        #: pynvml raises even NVML_SUCCESS there when its sizing call finds nothing.
        self.no_data_codes = frozenset({nvml.NVML_SUCCESS, nvml.NVML_ERROR_NOT_FOUND})

    def action(self, exc: BaseException) -> Action:
        if isinstance(exc, self.mismatch_error) and not isinstance(exc, self.nvml_error):
            return Action.OLDER_API
        return self._by_code.get(getattr(exc, "value", -1), Action.RETRY_NEXT_TICK)

    def raise_for_backend(self, exc: BaseException) -> None:
        """Turn the errors that are not about one value into the exceptions the source handles."""
        action = self.action(exc)
        if action is Action.GPU_LOST:
            raise GpuLost(str(exc)) from exc
        if action is Action.REINIT:
            raise NeedsReinit(str(exc)) from exc
        if action is Action.RESTART:
            raise NvmlBackendError(RESTART_MESSAGE) from exc


def unavailable_message(nvml: Any, exc: BaseException) -> str:
    """One sentence saying why NVML cannot start here and what to do about it."""
    code = getattr(exc, "value", None)
    if code == getattr(nvml, "NVML_ERROR_LIBRARY_NOT_FOUND", None):
        return "no NVIDIA driver found (libnvidia-ml.so.1 could not be loaded)"
    if code == getattr(nvml, "NVML_ERROR_DRIVER_NOT_LOADED", None):
        return "the NVIDIA kernel driver is not loaded (load it with 'modprobe nvidia' or reboot)"
    if code == getattr(nvml, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", None):
        return ("the NVIDIA user-space library and kernel module differ in version (driver upgraded without "
                "a reboot?): reboot or reload the nvidia kernel module")
    if code == getattr(nvml, "NVML_ERROR_NO_PERMISSION", None):
        return "no permission to open the NVIDIA devices (/dev/nvidia*): run as a user who may use the GPUs"
    return f"NVML could not start ({type(exc).__name__}: {exc})"
