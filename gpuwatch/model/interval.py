"""The sampling interval's one default and its limits.

Every command, the config file and the Sampler read them from here, so ``--interval``, ``[sampler]
interval`` and a Sampler built without one cannot disagree (``tests/core/test_one_road.py`` fails on a
second definition)."""

from __future__ import annotations

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
