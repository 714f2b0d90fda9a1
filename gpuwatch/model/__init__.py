"""The Snapshot data model shared by every part of gpuwatch."""

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import SCHEMA_VERSION, GpuSample, HostSample, Profiling, Snapshot, SourceStatus

__all__ = ["SCHEMA_VERSION", "GpuSample", "HostSample", "ProcessSample", "Profiling", "Snapshot", "SourceStatus"]
