"""The sampler: sources -> Snapshot, on one thread, to subscribers and a fixed-size history."""

from gpuwatch.sampler.history import History
from gpuwatch.sampler.sampler import Sampler

__all__ = ["History", "Sampler"]
