"""Profiles that say where a tick's and a daemon's time goes.

* cProfile of each source's ``poll`` called inline (the sampler runs them on worker threads, which
  cProfile does not see), with ``now`` stepped 0.2 s per call so GPM computes metrics every time.
* py-spy (sampling, ``--nonblocking``: the target is never paused) of a running process, summarised as
  the frames with the most own samples and the functions with the most inclusive samples.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks import commands
from benchmarks.stats import time_calls


def profile_polls(nvml_source: Any, host_source: Any, pids: Sequence[int], calls: int = 300) -> tuple[str, dict]:
    """cProfile text of both polls and their inline medians (ms)."""
    clock = [time.monotonic()]

    def nvml_poll() -> object:
        clock[0] += 0.2
        return nvml_source.poll(clock[0], ())

    def host_poll() -> object:
        return host_source.poll(time.monotonic(), pids)

    text = io.StringIO()
    medians: dict[str, float] = {}
    for name, fn in (("nvml source poll", nvml_poll), ("host source poll", host_poll)):
        medians[name] = round(time_calls(fn, 100, warmup=5).median_ms, 4)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            fn()
        prof.disable()
        text.write(f"==== cProfile: {name}, {calls} calls, inline median {medians[name]} ms\n")
        stats = pstats.Stats(prof, stream=text)
        stats.sort_stats("tottime").print_stats(14)
    return text.getvalue(), medians


def start_py_spy(pid: int, seconds: float, raw_out: Path, rate: int = 100) -> subprocess.Popen[bytes] | None:
    exe = commands.py_spy()
    if exe is None:
        return None
    cmd = [exe, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", str(rate),
           "--nonblocking", "--threads", "--format", "raw", "--output", str(raw_out)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish_py_spy(proc: subprocess.Popen[bytes] | None, timeout_s: float = 30.0) -> str | None:
    """None when it ran; otherwise why not."""
    if proc is None:
        return "py-spy not installed"
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return "py-spy did not finish"
    return None if proc.returncode == 0 else f"py-spy exit {proc.returncode}: {err.decode(errors='replace')[-400:]}"


def _short(frame: str) -> str:
    """``fn (path/to/module.py:12)`` -> ``fn (module.py:12)``."""
    if " (" in frame and frame.endswith(")"):
        fn, where = frame[:-1].split(" (", 1)
        return f"{fn} ({where.rsplit('/', 1)[-1]})"
    return frame


#: Leaf frames that mean "waiting", not working (py-spy cannot always tell a thread blocked in a system
#: call from one running without the GIL).
#: The sampler's worker threads block in ``SimpleQueue.get`` (leaf ``_Worker._run``) and the tick on its
#: call's lock (``_Call.wait``): C calls py-spy shows as running.
IDLE_LEAVES = ("selectors.py", "Condition.wait", "Event.wait", "(thread.py:81)", "(queue.py", "sleep (",
               "_Worker._run (", "_Call.wait (")


def _idle(leaf: str) -> bool:
    return any(mark in leaf for mark in IDLE_LEAVES)


def collapsed_stacks(raw: Path) -> Iterator[tuple[list[str], int]]:
    """``(frames, samples)`` for each line of a py-spy ``--format raw`` (collapsed stacks) file, outermost frame
    first; the first entry of a line, which names the thread, is left out."""
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";")[1:], int(count)


def summarize_collapsed(raw: Path, top: int = 15, keep: Callable[[str], bool] = lambda f: True) -> str:
    """Top frames of a py-spy ``--format raw`` (collapsed stacks) file: own samples and inclusive, with
    samples that end in a wait (select, condition, queue) left out."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for raw_frames, n in collapsed_stacks(raw):
        frames = [_short(f) for f in raw_frames if keep(f)]
        if frames and not _idle(frames[-1]):
            total += n
            own[frames[-1]] += n
            for f in set(frames):
                incl[f] += n
    if total == 0:
        return "(no samples: the process was idle or py-spy could not read it)\n"
    lines = [f"{total} samples not waiting", "own samples:"]
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    lines.append("inclusive:")
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in incl.most_common(top)]
    return "\n".join(lines) + "\n"
