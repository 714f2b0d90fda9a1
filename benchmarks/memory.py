"""Where the memory goes: RSS of a fresh interpreter after each import or call the programs make, and the
largest mappings of the running daemon and dashboard.

An RSS goal that is missed needs this profile beside it: how much is the interpreter, how much the NVML
library and its initialisation (the same for every tool that reads NVML), how much the frameworks
(Textual, the HTTP server) and how much gpuwatch's own code.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

#: A cache directory of this benchmark run's own (named by the parent's pid): the first step compiles.
_BINDING = ("import os; from gpuwatch.sources.nvml.binding import import_pynvml; "
            "import_pynvml({'XDG_CACHE_HOME': f'/tmp/gpuwatch-memory-steps-{os.getppid()}'})")

#: (label, code run in a fresh interpreter); each step's RSS is read right after its code.
STEPS: tuple[tuple[str, str], ...] = (
    ("python itself", "pass"),
    ("+ pynvml imported", "import pynvml"),
    # The same import with no .pyc to read (a prefix where none is, none written): equal to the step above
    # where pynvml is compiled at every start (an install without bytecode), which costs a daemon ~3 MiB
    # after its allocator release.
    ("+ pynvml compiled from source (no .pyc)",
     "import sys; sys.pycache_prefix = '/nonexistent-pycache'; sys.dont_write_bytecode = True; import pynvml"),
    # gpuwatch's import of it: where no .pyc is beside it, the first start compiles it into gpuwatch's cache
    # directory and every later start reads that (sources/nvml/binding.py).
    ("+ pynvml through gpuwatch, first start", _BINDING),
    ("+ pynvml through gpuwatch, a later start", _BINDING),
    ("+ nvmlInit", "import pynvml; pynvml.nvmlInit()"),
    ("asyncio", "import asyncio"),
    ("http.server + urllib.request", "import http.server, urllib.request"),
    ("textual.app", "import textual.app"),
    # The floor of any dashboard drawn with Textual that reads NVML, before it draws or keeps anything.
    ("textual.app + pynvml through gpuwatch + nvmlInit",
     "import textual.app; " + _BINDING + "; import pynvml; pynvml.nvmlInit()"),
    ("gpuwatch daemon code (no NVML)", "import gpuwatch.daemon.runner, gpuwatch.runtime.build"),
    # What `gpuwatch daemon` imports before it opens NVML: the command line, config, every part it runs.
    ("gpuwatch daemon's imports (no NVML)", "import gpuwatch.cli.main, gpuwatch.cli.daemon"),
    ("gpuwatch dashboard code (no NVML)", "import gpuwatch.tui.app, gpuwatch.runtime.build"),
    ("nvitop with its TUI", "import nvitop, nvitop.tui"),
    ("nvitop_exporter", "import nvitop_exporter"),
)

_READ = "\nprint(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])"


def import_steps(steps: tuple[tuple[str, str], ...] = STEPS) -> dict[str, float | str]:
    """label -> MiB, or the error where the step cannot run here (no driver, package missing)."""
    out: dict[str, float | str] = {}
    for label, code in steps:
        done = subprocess.run([sys.executable, "-c", code + _READ], capture_output=True, text=True, timeout=120)
        lines = done.stdout.strip().splitlines()
        if done.returncode == 0 and lines and lines[-1].isdigit():
            out[label] = round(int(lines[-1]) / 1024, 1)
        else:
            out[label] = (done.stderr.strip().splitlines() or ["failed"])[-1][:160]
    return out


def mappings(pid: int, top: int = 8) -> dict[str, float]:
    """The ``top`` largest resident mappings of ``pid`` (MiB by file, anonymous memory and heap apart)."""
    sizes: dict[str, int] = {}
    name = "[anon]"
    with open(f"/proc/{pid}/smaps") as fh:
        for line in fh:
            parts = line.split()
            if not parts:
                continue
            if not parts[0].endswith(":") and "-" in parts[0]:
                name = parts[5].rsplit("/", 1)[-1] if len(parts) > 5 else "[anon]"
            elif parts[0] == "Rss:":
                sizes[name] = sizes.get(name, 0) + int(parts[1])
    ranked = sorted(sizes.items(), key=lambda kv: -kv[1])
    return {k: round(v / 1024, 1) for k, v in ranked[:top]} | {"(total)": round(sum(sizes.values()) / 1024, 1)}


def markdown(steps: dict[str, Any], maps: dict[str, dict[str, float]]) -> list[str]:
    """The steps that ran as a table; those that could not run here (no driver, a tool not installed)
    named in one line, their error kept in the results only."""
    lines = ["| fresh interpreter, then | RSS (MiB) |", "| --- | --- |"]
    lines += [f"| {label} | {value} |" for label, value in steps.items() if isinstance(value, (int, float))]
    absent = [label for label, value in steps.items() if not isinstance(value, (int, float))]
    if absent:
        lines += ["", "Not measured here (no NVIDIA driver, or the tool is not installed): " + ", ".join(absent) + "."]
    for job, top in maps.items():
        lines += ["", f"Largest mappings of `{job}` at the end of the window (MiB): "
                      + ", ".join(f"{k} {v}" for k, v in top.items())]
    return lines
