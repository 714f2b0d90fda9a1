"""gpuwatch: a live terminal dashboard and alerting daemon for NVIDIA GPUs that says why a GPU is under-used."""

__version__ = "0.1.0"
