"""The sampling interval's one default and its limits, and how much history the sampler keeps.

Every command, the config file and the Sampler read them from here, so ``--interval``, ``[sampler]
interval`` and a Sampler built without one cannot disagree (``tests/core/test_one_road.py`` fails on a
second definition)."""

from __future__ import annotations

import math

#: Seconds between samples when nothing says otherwise (the dashboard, the daemon, record, snapshot).
DEFAULT_INTERVAL_S = 1.0
#: ``gpuwatch doctor`` looks twice a second: short spikes (memory churn) need more than one look a second.
DOCTOR_INTERVAL_S = 0.5
#: The shortest interval a tick can keep (one NVML + host tick costs a few ms; measured in BENCHMARKS.md).
MIN_INTERVAL_S = 0.05
#: The longest: an hour between samples is already more a census than a watch.
MAX_INTERVAL_S = 3600.0


def describe_bounds() -> str:
    """The bounds in words, for --help and the config's documentation."""
    return f"{MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}"

#: Seconds of snapshots the sampler keeps: how far back a paused dashboard can go (``--history``) and what a
#: daemon serves on ``/api/v1/history`` (``[sampler] history``). A snapshot of one GPU and two processes (the
#: bundled recording) holds 5.2 KiB, so ten minutes at 1 s is ~3 MiB; it grows with the GPUs and processes.
DEFAULT_HISTORY_S = 600.0
MIN_HISTORY_S, MAX_HISTORY_S = 60.0, 86400.0
#: The fewest snapshots kept whatever the interval (the alert rules' and the doctor's windows read them).
MIN_HISTORY_SNAPSHOTS = 60


def history_capacity(history_s: float, interval: float) -> int:
    """Snapshots to keep for ``history_s`` seconds at one every ``interval`` seconds."""
    return max(MIN_HISTORY_SNAPSHOTS, math.ceil(history_s / interval))
