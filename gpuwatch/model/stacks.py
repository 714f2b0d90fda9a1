"""Where a GPU-feeding thread spends its time: sampled stacks (Python and native frames).

Two shapes live here. ``StackSample`` is the raw evidence a stack source puts on a Snapshot: the stacks of
one process's threads sampled over a span, frames innermost first, so a recording carries them and
``doctor --replay`` reasons from exactly what the live doctor saw. ``StackProfile`` is the older reduced
form (a thread's few dominant frames) that findings quote as evidence ("62 % of samples in
tokenizer.py:encode"), which is what an engineer otherwise finds by attaching py-spy by hand.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame. ``file`` is the path the interpreter reports ("" for a native frame without one);
    ``native`` marks a C/C++ frame (then ``module`` is its shared library, e.g. ``libtorch_cpu.so``)."""

    function: str
    file: str = ""
    line: int | None = None
    native: bool = False
    module: str | None = None

    def label(self) -> str:
        """``file.py:function`` (the file's last path part), or ``libfoo.so:symbol`` for a native frame."""
        where = self.module if self.native and self.module else self.file.rsplit("/", 1)[-1]
        return f"{where or '?'}:{self.function or '?'}"


@dataclass(frozen=True, slots=True)
class ThreadStack:
    """One distinct stack of one thread and how many samples found exactly it (frames innermost first).

    ``idle``: the sampler saw the thread not running (asleep in that stack); ``gil``: it held the GIL."""

    tid: int
    frames: tuple[Frame, ...]
    count: int = 1
    idle: bool = False
    gil: bool = False


@dataclass(frozen=True, slots=True)
class StackSample:
    """Stacks of one process's threads sampled over ``span_s`` seconds ending at ``time``.

    A stack source emits one per process each time it has sampled it; the Snapshot of that tick carries it.
    ``native``: native frames were asked for (else only Python frames are present)."""

    pid: int
    time: float
    span_s: float
    stacks: tuple[ThreadStack, ...] = ()
    native: bool = False

    @property
    def samples(self) -> int:
        return sum(s.count for s in self.stacks)


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
