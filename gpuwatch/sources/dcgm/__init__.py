"""DCGM source: GPUs, their DCGM_FI_* fields and DCGM profiling counters from a dcgm-exporter /metrics page.

``DcgmSource(url)`` is a :class:`gpuwatch.sources.base.Source` (name "dcgm", role "gpu"). With NVML present
the sampler merges its GPUs into NVML's by UUID and keeps both ``profiling["gpm"]`` and
``profiling["dcgm"]``; without NVML its GPUs are the Snapshot's GPUs.
"""

from gpuwatch.sources.dcgm.parse import DcgmParseError
from gpuwatch.sources.dcgm.source import DcgmError, DcgmSource, check_url

__all__ = ["DcgmError", "DcgmParseError", "DcgmSource", "check_url"]
