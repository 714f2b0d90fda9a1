"""The Snapshot data model shared by every part of gpuwatch."""

from gpuwatch.model.snapshot import (
    SCHEMA_VERSION,
    GpuSample,
    HostSample,
    ProcessSample,
    Profiling,
    Snapshot,
    SourceStatus,
)

__all__ = ["SCHEMA_VERSION", "GpuSample", "HostSample", "ProcessSample", "Profiling", "Snapshot", "SourceStatus"]
