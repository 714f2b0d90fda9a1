"""NVML source (nvidia-ml-py): GPU getters on per-field cadences, GPM profiling, processes on the GPUs."""

from gpuwatch.sources.nvml.errors import NvmlBackendError
from gpuwatch.sources.nvml.source import NvmlSource

__all__ = ["NvmlBackendError", "NvmlSource"]
