"""Sources: each knows one backend (NVML+GPM, DCGM, psutil, a recording) and nothing else."""
