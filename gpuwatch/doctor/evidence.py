"""How findings are worded: percentages, sizes and the GPU's own numbers, the same way in every rule."""

from __future__ import annotations

from gpuwatch.doctor.process_window import ProcessWindow
from gpuwatch.doctor.window import GpuWindow
from gpuwatch.model.finding import Finding, Severity

GIB = float(1 << 30)


def pct(name: str, value: float | None) -> str | None:
    return None if value is None else f"{name} {value:.1f}%"


def gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def rate(value: float) -> str:
    return f"{value / 1e9:.1f} GB/s" if value >= 1e9 else f"{value / 1e6:.0f} MB/s"


def gpu_evidence(g: GpuWindow, *extra: str | None) -> tuple[str, ...]:
    """The rule's own numbers first, then what the GPU did, then how much data backs it."""
    base = (pct("GPU-Util", g.util), pct("SM activity", g.sm_active), pct("SM occupancy", g.sm_occupancy),
            pct("tensor activity", g.tensor_active))
    return (*(e for e in (*extra, *base) if e), f"median of {g.samples} samples over {g.seconds:.0f} s")


def finding(code: str, title: str, severity: Severity, score: float, g: GpuWindow, evidence: tuple[str, ...],
            fix: str, pid: int | None = None) -> Finding:
    return Finding(code=code, title=title, severity=severity, score=round(max(0.0, min(100.0, score)), 1),
                   gpu_index=g.index, pid=pid, evidence=evidence, fix=fix)


def thread_line(p: ProcessWindow) -> str:
    thread = f"thread {p.top_thread_id}" if p.top_thread_id is not None else "its busiest thread"
    return f"{p.label}: {thread} at {p.top_thread_cpu or 0:.0f}% of one core"
