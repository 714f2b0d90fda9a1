"""Python stacks of a busy thread, sampled with py-spy (an optional extra) while the doctor watches.

py-spy reads another process's memory, so it needs ptrace permission (root, CAP_SYS_PTRACE, or
``kernel.yama.ptrace_scope = 0`` for your own processes). When it is missing or refused the sampler says
so once and the doctor carries on without stacks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from typing import Any

from gpuwatch.model.stacks import StackProfile

DUMP_TIMEOUT_S = 3.0


def frame_label(frame: dict[str, Any]) -> str:
    where = frame.get("short_filename") or frame.get("filename") or "?"
    return f"{where}:{frame.get('name') or '?'}"


def pick_thread(threads: list[dict[str, Any]], tid: int | None) -> dict[str, Any] | None:
    """The thread with OS id ``tid``; else the one holding the GIL; else the first active one."""
    for t in threads:
        if tid is not None and t.get("os_thread_id") == tid:
            return t
    return next((t for t in threads if t.get("owns_gil")), next((t for t in threads if t.get("active")), None))


class StackSampler:
    """Counts the innermost frame of one thread per process over repeated ``py-spy dump`` calls."""

    def __init__(self, exe: str | None = None) -> None:
        # the [stacks] extra puts py-spy beside this Python, which need not be on PATH (a venv not activated)
        self.exe = exe or shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy")
        self.problem: str | None = None if self.exe else \
            "--stacks: py-spy is not installed (pip install py-spy); carrying on without stacks"
        self._frames: dict[int, Counter[str]] = {}
        self._tids: dict[int, int | None] = {}

    def sample(self, pid: int, tid: int | None) -> None:
        if self.exe is None or self.problem is not None:
            return
        try:
            done = subprocess.run([self.exe, "dump", "--pid", str(pid), "--json"], capture_output=True,
                                  text=True, timeout=DUMP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.problem = f"--stacks: py-spy failed ({exc}); carrying on without stacks"
            return
        if done.returncode != 0:
            err = (done.stderr or done.stdout).strip().splitlines()
            if any(w in " ".join(err).lower() for w in ("permission", "ptrace", "operation not permitted")):
                self.problem = ("--stacks: py-spy needs ptrace permission (run as root or grant CAP_SYS_PTRACE); "
                                "carrying on without stacks")
            return  # the process may have exited between ticks: try again next time
        try:
            thread = pick_thread(json.loads(done.stdout), tid)
        except (json.JSONDecodeError, TypeError, AttributeError):
            return
        if thread and thread.get("frames"):
            self._frames.setdefault(pid, Counter())[frame_label(thread["frames"][0])] += 1
            self._tids[pid] = thread.get("os_thread_id", tid)

    def profiles(self) -> dict[int, StackProfile]:
        out = {}
        for pid, counts in self._frames.items():
            n = sum(counts.values())
            out[pid] = StackProfile(pid, self._tids.get(pid), n,
                                    tuple((frame, c / n) for frame, c in counts.most_common(5)))
        return out
