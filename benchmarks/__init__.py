"""Benchmarks: what a gpuwatch tick, daemon and dashboard cost, measured beside nvitop, gpustat and nvidia-smi.

``python3 benchmarks/run.py`` runs everything on a GPU machine; ``--local`` runs the parts that need no GPU
(fake NVML at scale, replayed recordings). Results go to JSON and to BENCHMARKS.md.
"""
