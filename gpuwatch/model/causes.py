"""Why GPU time was lost: the fixed set of causes that lost GPU-seconds are attributed to.

The doctor's finding codes come first (the cause it names at that moment), then three causes of the
accounting's own for moments the doctor names nothing: memory held and nothing runs, nobody holds the GPU,
or a loss no rule explains. Every consumer (the efficiency accounting, ``/metrics``, ``gpuwatch report``,
the Grafana dashboard) reads this one tuple, so the label ``cause`` has a fixed, documented set of values.
The doctor's class table (``doctor/classes.py``) declares the codes; the model cannot import the doctor,
so :data:`FINDING_CODES` repeats them as the model's fixed label set and a test keeps the two equal.
"""

from __future__ import annotations

#: Every code a doctor rule can give a GPU, ``healthy`` included (a saturated GPU's small remaining gap).
FINDING_CODES: tuple[str, ...] = (
    "memory_leak", "memory_churn", "h2d_copies", "launch_bound", "input_cpu_bound", "dataloader_bound",
    "off_cpu_wait", "time_slicing", "small_kernels", "fp32_no_tensor", "memory_bandwidth_bound", "throttled",
    "memory_idle", "healthy", "d2h_copies", "gil_contention", "host_cpu_contention", "demand_bound",
    "idle_breakdown", "long_kernels", "feeder_bound")
#: Memory held on the GPU, nothing runs, and the doctor has no finding for it (yet).
HELD_IDLE = "held_idle"
#: No process holds the GPU: all of its time is lost (owner: the pod the kubelet gave it, if any).
NO_PROCESS = "no_process"
#: Lost time the doctor has no finding for, or a finding code this list does not know.
UNEXPLAINED = "unexplained"
CAUSES: tuple[str, ...] = (*FINDING_CODES, HELD_IDLE, NO_PROCESS, UNEXPLAINED)
#: Who lost it: the Kubernetes pod where the kubelet knows it, else the process's user and command.
OWNER_LABELS = ("namespace", "pod", "container", "user", "command")
#: The states GPU-seconds are counted in, each a part of the one before.
STATES = ("observed", "allocated", "busy", "effective")


def cause_of(code: str | None) -> str | None:
    """``code`` when it is a known cause, else None (the caller falls back to its own causes)."""
    return code if code in CAUSES else None
