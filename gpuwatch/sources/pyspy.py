"""py-spy, the stack sampler (an optional extra): where it is, how to ask it, and how to read what it says.

``py-spy record --format raw`` samples one process's threads for a few seconds at a fixed rate and writes
each distinct stack once with its count ("collapsed" stacks, root first): many samples for one start-up,
where ``py-spy dump`` gives one sample per call and, with native frames, loads every library's symbols
again each time. Reading another process's memory needs ptrace permission; :func:`ptrace_help` says what
is missing here and how to grant it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from gpuwatch.model.stacks import Frame, StackSample, ThreadStack

#: Bounds on what one recording window keeps: the innermost frames of a stack, distinct stacks of a window.
MAX_FRAMES = 64
MAX_STACKS = 256
#: Threads of one process a window keeps (the most sampled first): a pool of 60 idle threads is not evidence.
MAX_THREADS = 8

PTRACE_WORDS = ("permission denied", "operation not permitted", "eperm", "ptrace")
NOT_PYTHON_WORDS = ("failed to find python version", "not a python", "failed to find a python interpreter",
                    "no such process", "failed to open process")
NATIVE_WORDS = ("native", "unwind", "libunwind")


def find_pyspy() -> str | None:
    """py-spy beside this interpreter (the ``stacks`` extra installs it there, which need not be on PATH when a
    venv is not activated), else in the ``bin`` folder of a package folder on sys.path (``pip install
    --target DIR`` puts it in DIR/bin), else on PATH."""
    beside = [os.path.dirname(sys.executable)] + [os.path.join(p, "bin") for p in sys.path if p and os.path.isabs(p)]
    return shutil.which("py-spy", path=os.pathsep.join(beside)) or shutil.which("py-spy")


def record_command(exe: str, pid: int, duration_s: int, rate_hz: int, native: bool, output: str) -> list[str]:
    """``py-spy record`` of ``pid`` for ``duration_s`` seconds at ``rate_hz``, every thread (idle ones too: a
    feeding thread waiting on a queue is evidence), raw collapsed stacks with OS thread ids into ``output``."""
    cmd = [exe, "record", "--pid", str(pid), "--duration", str(duration_s), "--rate", str(rate_hz),
           "--format", "raw", "--output", output, "--threads", "--idle"]
    if native:
        cmd.append("--native")
    else:
        cmd.append("--nonblocking")  # Python frames only: read without pausing the process
    return cmd


def parse_frame(text: str) -> Frame:
    """One collapsed frame: ``func (file.py:12)`` (Python), ``symbol (libfoo.so)`` or ``0x7f.. (libc.so.6)``
    (native). The function of a C++ frame may itself hold parentheses: the last `` (`` splits."""
    head, sep, tail = text.rpartition(" (")
    if not sep or not tail.endswith(")"):
        return Frame(function=text)
    where = tail[:-1]
    line: int | None = None
    path, colon, number = where.rpartition(":")
    if colon and number.isdigit():
        where, line = path, int(number)
    python = where.endswith((".py", ".pyx", ".pyw")) or where.startswith("<")
    if python:
        return Frame(function=head, file=where, line=line)
    return Frame(function=head, native=True, module=where.rsplit("/", 1)[-1] or None, line=line)


def parse_thread(head: str) -> int | None:
    """The OS thread id of ``thread (1234): MainThread`` (None when the line names no thread)."""
    if not head.startswith("thread ("):
        return None
    number = head[len("thread ("):].split(")", 1)[0].strip()
    try:
        return int(number, 16) if number.lower().startswith("0x") else int(number)
    except ValueError:
        return None


def parse_raw(text: str, pid: int, time: float, span_s: float, native: bool,
              prefer: tuple[int, ...] = ()) -> StackSample:
    """A StackSample from ``py-spy record --format raw --threads`` output: one ``root;...;leaf COUNT`` line per
    distinct stack, the first part naming the thread. Frames are kept innermost first, at most MAX_FRAMES;
    at most MAX_STACKS stacks of at most MAX_THREADS threads: the main thread and those in ``prefer`` (the
    busiest thread the host source saw), then the threads seen in the most distinct stacks (every thread is
    sampled at every tick, idle ones too, so counts do not tell a working thread from a parked one)."""
    stacks: list[ThreadStack] = []
    per_thread: dict[int, int] = {}
    distinct: dict[int, int] = {}
    for raw_line in text.splitlines():
        body, _, count_text = raw_line.rstrip().rpartition(" ")
        if not body or not count_text.isdigit():
            continue
        parts = body.split(";")
        if parts and parts[0].startswith("process "):
            parts = parts[1:]
        tid = parse_thread(parts[0]) if parts else None
        if tid is None:
            tid = pid
        else:
            parts = parts[1:]
        frames = tuple(parse_frame(p) for p in reversed(parts[-MAX_FRAMES:]) if p)
        count = int(count_text)
        stacks.append(ThreadStack(tid=tid, frames=frames, count=count))
        per_thread[tid] = per_thread.get(tid, 0) + count
        distinct[tid] = distinct.get(tid, 0) + 1
    first = {pid, *prefer}
    kept = set(sorted(per_thread, key=lambda t: (t not in first, -distinct[t], -per_thread[t]))[:MAX_THREADS])
    chosen = sorted((s for s in stacks if s.tid in kept), key=lambda s: -s.count)[:MAX_STACKS]
    return StackSample(pid=pid, time=time, span_s=span_s, stacks=tuple(chosen), native=native)


def classify_error(text: str) -> str:
    """What a failed run of py-spy means: ``ptrace`` (not permitted), ``not_python`` (nothing to sample there,
    or gone), ``native`` (native unwinding failed: Python frames alone may work), else ``other``."""
    low = text.lower()
    if any(w in low for w in PTRACE_WORDS):
        return "ptrace"
    if any(w in low for w in NOT_PYTHON_WORDS):
        return "not_python"
    if any(w in low for w in NATIVE_WORDS):
        return "native"
    return "other"


def ptrace_scope() -> int | None:
    """``kernel.yama.ptrace_scope`` (None where Yama is not there)."""
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip())
    except (OSError, ValueError):
        return None


def has_cap_sys_ptrace() -> bool:
    """Whether this process holds CAP_SYS_PTRACE (bit 19 of CapEff)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> 19 & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


GRANT = ("grant CAP_SYS_PTRACE: docker run --cap-add SYS_PTRACE; the systemd unit: gpuwatch install-service "
         "--stacks --write (AmbientCapabilities=CAP_SYS_PTRACE); the Kubernetes DaemonSet: the container's "
         "securityContext capabilities.add: [SYS_PTRACE] (deploy/kubernetes, the full overlays have it)")


def ptrace_help(pid: int) -> str:
    """Why py-spy could not read process ``pid`` here and exactly how to let it."""
    why = []
    if not has_cap_sys_ptrace():
        why.append("this process lacks CAP_SYS_PTRACE" + ("" if os.geteuid() == 0 else " and is not root"))
    scope = ptrace_scope()
    if scope is not None and scope >= 1:
        why.append(f"kernel.yama.ptrace_scope is {scope}" + (" (ptrace disabled until reboot)" if scope == 3 else ""))
    reason = "; ".join(why) or "the kernel or a seccomp profile refused ptrace"
    lower = "; or, for processes of your own user, sysctl kernel.yama.ptrace_scope=0" if scope in (1, 2) else ""
    return (f"stacks: py-spy may not read process {pid} ({reason}): the feeding threads' stacks are not seen and "
            f"findings rest on /proc alone. To see them, {GRANT}{lower}")


NO_PYSPY = ("stacks: py-spy is not installed, so the feeding threads' stacks are not seen and findings rest on /proc "
            "alone. Install it beside gpuwatch: pip install 'gpuwatch-monitor[stacks]' (or pip install py-spy); "
            "turn stacks off with --no-stacks or [sources] stacks = false")
