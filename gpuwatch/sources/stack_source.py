"""Stacks of the processes on under-used GPUs, sampled in the background at a bounded rate and cost.

The collector offers each tick's GPUs and processes (:meth:`StackSource.offer`) and takes the windows that
have finished since (:meth:`StackSource.take`); both return at once. A worker thread of its own runs
``py-spy record`` on the chosen processes for WINDOW_S seconds at RATE_HZ (one start-up per window, so a
torch process's native symbols are loaded once per window, not once per sample), at most MAX_CONCURRENT
processes at a time and each process at most once every ``every_s`` seconds, and only while its GPU is
under-used: a busy GPU needs no explanation. The CPU py-spy used (its rusage when reaped) is held to a
budget: a round that cost more than BUDGET of a core (the doctor: DOCTOR_BUDGET) delays the next one.
Where py-spy is missing or ptrace is refused the source says so (its SourceStatus's message, and one log
line), and everything else carries on from /proc.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwatch.model.feeders import FeederSample
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, SourceStatus
from gpuwatch.model.stacks import StackSample
from gpuwatch.sources import pyspy

log = logging.getLogger(__name__)

WINDOW_S = 4
RATE_HZ = 10
#: Each process at most once every this many seconds (the daemon's and the dashboard's pace; the doctor,
#: watching for a short while on purpose, records back to back).
EVERY_S = 15.0
DOCTOR_EVERY_S = float(WINDOW_S)
#: py-spy's CPU, as a share of one core: the daemon's and the dashboard's, and the doctor's (watching on
#: purpose, for a short while). A round that cost more than its share delays the next one. A round of two torch
#: processes costs about 0.16 CPU-s (native symbols loaded once per window): at the daemon's share one round
#: every ~160 s, which keeps py-spy below half of an always-on daemon's own CPU.
BUDGET = 0.001
#: `gpuwatch doctor` without stacks costs about 0.6 % of a core per second of watching (H200, beside a fault):
#: py-spy's share held to 0.4 % keeps a live doctor within 1 % of a core over any watch the budget acts on.
DOCTOR_BUDGET = 0.004
MAX_CONCURRENT = 2
#: A feeder of a process on an under-used GPU using this much of a core has its stacks sampled too; so has one
#: whose threads sit in storage I/O (D state) or that moves this many bytes/s to or from storage, at any CPU: a
#: feeder that waits on storage is as much what the GPU waits for as a busy one, and its stacks name the code
#: that reads or writes (the doctor's cut for a feeder bound on storage, ``stack_window.FEEDER_IO_RATE``).
BUSY_FEEDER = 50.0
STORAGE_FEEDER = 5e6
#: A GPU is under-used below this GPU-Util, or below this SM activity where profiling counters are read
#: (GPU-Util near 100 % with idle SMs is a few long kernels, whose host side is worth seeing too).
UNDERUSED_UTIL = 90.0
UNDERUSED_SM = 50.0
#: A process py-spy cannot read as Python (not Python, or gone) is not asked again for this long.
NOT_PYTHON_RETRY_S = 300.0
#: Processes whose last window is remembered before the ones no longer on a GPU are forgotten.
MAX_REMEMBERED = 4096
#: How long close() waits for each killed recorder to end (a killed py-spy ends at once).
CLOSE_WAIT_S = 2.0
#: Windows waiting to be taken (a Sampler that stopped ticking must not grow them without bound).
MAX_PENDING = 64


@dataclass(frozen=True)
class _Target:
    pid: int
    native: bool
    #: Threads to keep first (the busiest one the host source saw).
    prefer: tuple[int, ...] = ()


def underused(gpu: GpuSample | None) -> bool:
    """Whether a GPU is worth explaining now: GPU-Util below UNDERUSED_UTIL (or unknown), or its SMs mostly idle."""
    if gpu is None or gpu.lost:
        return False
    sm = gpu.sm_active
    return gpu.gpu_util is None or gpu.gpu_util < UNDERUSED_UTIL or (sm is not None and sm < UNDERUSED_SM)


def working(feeder: FeederSample) -> bool:
    """A feeder worth sampling: busy on a core, or in storage I/O (a thread in D state, or bytes moving)."""
    moved = (feeder.io_read_bytes_s or 0.0) + (feeder.io_write_bytes_s or 0.0)
    return (feeder.cpu_percent or 0.0) >= BUSY_FEEDER or (feeder.threads_in_io_wait or 0) > 0 \
        or "io" in feeder.thread_waits or moved >= STORAGE_FEEDER


class StackSource:
    """Background stack sampling of GPU processes; see the module docstring."""

    name = "stacks"

    def __init__(self, *, every_s: float = EVERY_S, window_s: int = WINDOW_S, rate_hz: int = RATE_HZ,
                 native: bool = True, exe: str | None = None, budget: float | None = None) -> None:
        self.exe = exe if exe is not None else pyspy.find_pyspy()
        self.every_s, self.window_s, self.rate_hz, self.native = every_s, max(1, window_s), max(1, rate_hz), native
        self.problem: str | None = None if self.exe else pyspy.NO_PYSPY
        self._said: set[str] = set()
        self._last: dict[int, float] = {}
        self._skip: dict[int, float] = {}
        self._python_only: set[int] = set()
        self._done: list[StackSample] = []
        self._lock = threading.Lock()
        self._busy = threading.Event()
        self._rounds: queue.SimpleQueue[list[_Target] | None] = queue.SimpleQueue()
        self._tmp: str | None = None
        self._running: list[subprocess.Popen[bytes]] = []
        self._closed = False
        self._worker: threading.Thread | None = None
        #: Windows read so far, and the CPU seconds py-spy used for them (what stacks cost the host).
        self.windows = 0
        self.cpu_s = 0.0
        #: py-spy's CPU allowed, a share of one core averaged over a round and the pause after it: a process
        #: whose native symbols are costly to load is sampled less often, never at more cost.
        self.budget = budget if budget is not None else (DOCTOR_BUDGET if every_s <= window_s else BUDGET)
        self._next_at = -math.inf

    # -- the tick's side: never blocks -------------------------------------------------------------------
    def offer(self, gpus: Sequence[GpuSample], processes: Sequence[ProcessSample],
              feeders: Sequence[FeederSample] = ()) -> None:
        """Start a round on the processes of under-used GPUs that are due (the longest unseen first), then on
        their busiest feeders (what a child compiles or decodes is the evidence that names it), unless a
        round is still running or the last one's cost is not yet within budget."""
        now = time.monotonic()
        if self.exe is None or self._busy.is_set() or now < self._next_at:
            return
        by_index = {g.index: g for g in gpus}
        waiting = {p.pid for p in processes if underused(by_index.get(p.gpu_index))}
        busiest = {p.pid: p.top_thread_id for p in processes if p.top_thread_id is not None}
        gpu_due = sorted((self._last.get(pid, -math.inf), pid) for pid in waiting if self._due(pid, now))
        fed = sorted({(-(f.cpu_percent or 0.0), f.pid) for f in feeders if f.feeds in waiting and working(f)
                      and f.pid not in waiting and self._due(f.pid, now)})
        # one place of a round is kept for a busy feeder, when there is one
        gpu_slots = MAX_CONCURRENT - 1 if fed else MAX_CONCURRENT
        chosen = list(dict.fromkeys([pid for _, pid in gpu_due][:gpu_slots] + [pid for _, pid in fed]))[:MAX_CONCURRENT]
        if not chosen:
            return
        if len(self._last) > MAX_REMEMBERED:  # pids of processes long gone: forget them
            keep = waiting | {f.pid for f in feeders}
            self._last = {pid: t for pid, t in self._last.items() if pid in keep}
            self._skip = {pid: t for pid, t in self._skip.items() if t > now}
        for pid in chosen:
            self._last[pid] = now
        self._busy.set()
        if self._worker is None:
            self._worker = threading.Thread(target=self._run, name="gpuwatch-stacks", daemon=True)
            self._worker.start()
        self._rounds.put([_Target(pid, self.native and pid not in self._python_only,
                                  (busiest[pid],) if pid in busiest else ()) for pid in chosen])

    def _due(self, pid: int, now: float) -> bool:
        return self._skip.get(pid, 0.0) <= now and now - self._last.get(pid, -math.inf) >= self.every_s - 0.5

    def take(self) -> tuple[StackSample, ...]:
        """The windows finished since the last call."""
        with self._lock:
            done, self._done = self._done, []
        return tuple(done)

    def status(self) -> SourceStatus:
        """``ok``, with a message when stacks cannot be seen (py-spy missing, ptrace refused): what is missing
        and how to grant it. Stacks are evidence, not measurements: their absence is said (here, and in one
        log line per problem), never reported as a failing source that would raise GpuwatchSourceStale on
        every node where ptrace is not granted."""
        if self.problem is not None and self.problem not in self._said:
            self._said.add(self.problem)
            log.warning("%s", self.problem)
        return SourceStatus(self.name, "ok", self.problem)

    def close(self) -> None:
        """Stop: recorders still running are ended (a one-shot command must not leave py-spy behind)."""
        self._closed = True
        self._rounds.put(None)
        for proc in list(self._running):
            if proc.poll() is None:
                proc.kill()
        for proc in list(self._running):
            try:  # reaped here: its CPU counts in this process's rusage (what stacks cost), and no zombie stays
                proc.wait(timeout=CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                log.debug("py-spy %s did not end within %s s of being killed", proc.pid, CLOSE_WAIT_S)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # -- the worker ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        while (targets := self._rounds.get()) is not None:
            try:
                self._round(targets)
            except Exception:  # a sampler of evidence must never take the process down
                log.exception("stack sampling round failed")
            finally:
                self._busy.clear()

    def _round(self, targets: list[_Target]) -> None:
        started = time.monotonic()
        running = [(t, *self._start(t)) for t in targets]
        self._running = [proc for _, proc, _ in running if proc is not None]
        cpu = 0.0
        for target, proc, out in running:
            if proc is None:
                continue
            used, timed_out = self._reap(proc, started + self.window_s + 10)
            cpu += used
            try:
                with open(out + ".err", encoding="utf-8", errors="replace") as f:
                    err = f.read(65536)
                os.unlink(out + ".err")
            except OSError:
                err = ""
            self._finish(target, proc, out, "native unwinding did not finish in time" if timed_out else err)
        self.cpu_s += cpu
        if self.budget > 0:  # the next round waits until this one's CPU is within budget
            self._next_at = started + cpu / self.budget

    @staticmethod
    def _reap(proc: subprocess.Popen[bytes], deadline: float) -> tuple[float, bool]:
        """Wait for a recorder (killed past ``deadline``): the CPU seconds it used, and whether it was killed."""
        killed = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                killed = True
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.1)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return float(usage.ru_utime + usage.ru_stime), killed

    def _start(self, t: _Target) -> tuple[subprocess.Popen[bytes] | None, str]:
        if self._tmp is None:
            try:
                self._tmp = tempfile.mkdtemp(prefix="gpuwatch-stacks-")
            except OSError as exc:
                self.problem = (f"stacks: no writable temporary folder for py-spy's output ({exc.strerror}: "
                                f"{tempfile.gettempdir()}); set TMPDIR to one, or mount an emptyDir at /tmp")
                return None, ""
        out = os.path.join(self._tmp, f"{t.pid}.txt")
        assert self.exe is not None
        cmd = pyspy.record_command(self.exe, t.pid, self.window_s, self.rate_hz, t.native, out)
        try:
            with open(out + ".err", "w") as err:
                return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err), out
        except OSError as exc:
            self.problem = f"stacks: py-spy could not be run ({exc}); findings rest on /proc alone"
            return None, out

    def _finish(self, t: _Target, proc: subprocess.Popen[bytes], out: str, err: str) -> None:
        try:
            with open(out, encoding="utf-8", errors="replace") as f:
                text = f.read(4 << 20)
            os.unlink(out)
        except OSError:
            text = ""
        if text.strip():
            sample = pyspy.parse_raw(text, t.pid, time.time(), float(self.window_s), t.native, t.prefer)
            with self._lock:
                self._done = [*self._done, sample][-MAX_PENDING:]
            self.windows += 1
            if self.problem is not None and self.problem.startswith("stacks: py-spy may not"):
                self.problem = None  # another process could be read: the refusal was that one's
            return
        if proc.returncode == 0:
            return
        kind = pyspy.classify_error(err)
        if kind == "ptrace":
            self.problem = pyspy.ptrace_help(t.pid)
            self._skip[t.pid] = time.monotonic() + NOT_PYTHON_RETRY_S
        elif kind == "native" and t.native:
            self._python_only.add(t.pid)  # Python frames alone, from the next window
            self._last.pop(t.pid, None)
        else:
            self._skip[t.pid] = time.monotonic() + NOT_PYTHON_RETRY_S
