"""What the numbers were measured on: date, machine, GPU, driver and the versions of everything compared."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import socket
import subprocess
from typing import Any

PACKAGES = ("textual", "nvitop", "nvitop-exporter", "gpustat", "psutil", "prometheus-client", "nvidia-ml-py",
            "torch", "py-spy")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def versions() -> dict[str, str]:
    import gpuwatch

    out = {"gpuwatch": getattr(gpuwatch, "__version__", "?")}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def gpu_info() -> tuple[str, str]:
    """("1 x NVIDIA H200, 143771 MiB", "driver 580.159.04, NVML 13.580.159.04, CUDA 13.0")"""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            n = pynvml.nvmlDeviceGetCount()
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            name = pynvml.nvmlDeviceGetName(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
            gpu = f"{n} x {name}, {mem} MiB"
            driver = (f"driver {pynvml.nvmlSystemGetDriverVersion()}, NVML {pynvml.nvmlSystemGetNVMLVersion()}, "
                      f"CUDA {cuda // 1000}.{cuda % 1000 // 10}")
        finally:
            pynvml.nvmlShutdown()
        return gpu, driver
    except Exception as exc:  # no driver here: the local mode says so
        return "none (no NVIDIA driver)", f"n/a ({type(exc).__name__})"


def machine() -> str:
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    virt = ""
    try:
        virt = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return (f"{socket.gethostname()}: {os.cpu_count()} x {_cpu_model()}, {mem_gib:.0f} GiB, "
            f"Linux {platform.release()}{', ' + virt if virt and virt != 'none' else ''}")


def describe(command: str, load: str) -> dict[str, Any]:
    gpu, driver = gpu_info()
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
            "machine": machine(), "gpu": gpu, "driver": driver, "python": platform.python_version(),
            "versions": versions(), "load": load, "command": command}
