"""What the common XID codes mean, after NVIDIA's public XID catalogue (docs.nvidia.com/deploy/xid-errors).

An XID is the NVIDIA driver's error report for one GPU. Some are the application's fault (13, 31, 43, 45),
some the hardware's (48, 79, 94/95...); the TUI, the alert annotations and the exported Prometheus rules
all print the meaning from this one table, so they cannot disagree.
"""

from __future__ import annotations

#: XID code -> a short meaning (what happened, and whose fault it usually is).
XID_MEANINGS: dict[int, str] = {
    8: "GPU stopped processing",
    13: "graphics engine exception, usually an application bug",
    31: "GPU memory page fault, usually an illegal access by the application",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing the application's channel, usually an application error",
    45: "preemptive cleanup after an earlier error or a killed process",
    48: "double-bit ECC error (uncorrectable memory error)",
    61: "internal micro-controller breakpoint or warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    68: "video decoder (NVDEC) exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (the affected application must restart)",
    95: "uncontained ECC error (all applications on the GPU affected; reset the GPU)",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link corrected error",
    140: "unrecovered ECC error",
    143: "GPU initialisation failure",
    154: "GPU recovery action changed",
}


def xid_meaning(code: int | None) -> str | None:
    """The meaning of XID ``code``, or None for a code the table does not list."""
    return None if code is None else XID_MEANINGS.get(int(code))


def describe_xid(code: int) -> str:
    """``XID 79 (GPU fallen off the bus)``, or ``XID 200`` for an unlisted code."""
    meaning = xid_meaning(code)
    return f"XID {code} ({meaning})" if meaning else f"XID {code}"
