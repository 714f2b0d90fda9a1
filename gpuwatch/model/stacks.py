"""Where a busy thread spends its time: sampled Python stacks, reduced to the few frames that dominate.

The doctor adds this to a CPU-side finding as evidence ("62 % of samples in tokenizer.py:encode"), which
is what an engineer otherwise finds by attaching py-spy by hand.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StackProfile:
    """``top``: (frame, share of samples) pairs, most common first; a frame reads ``file.py:function``."""

    pid: int
    tid: int | None
    samples: int
    top: tuple[tuple[str, float], ...]

    def evidence(self) -> str:
        parts = [f"{100 * share:.0f}% of samples in {frame}" for frame, share in self.top[:3]]
        thread = f"thread {self.tid}" if self.tid is not None else "the busiest thread"
        return f"py-spy, {self.samples} samples of {thread}: " + "; ".join(parts)
