"""Processes under measurement: start them (plainly or in a pty of a given size), meter their CPU and RSS
over a window, and stop them. Every process gets its own session so stopping one stops all it started."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import psutil

_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")
#: The most bytes of a pty program's output kept when it is recorded.
RECORD_MAX = 4 * 2**20

# Makes the pty the controlling terminal, as a terminal emulator would, then becomes the program.
_PTY_SHIM = ("import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
             "os.execvp(sys.argv[1], sys.argv[1:])")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout_s: float = 30.0, proc: Started | None = None) -> bytes:
    """The body of the first 200 answer from ``url``; raises TimeoutError (or when ``proc`` exits first)."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode} before {url} answered; "
                               f"its log: {proc.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bytes(resp.read())
        except OSError as exc:
            last = exc
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout_s:g} s ({last})")


class Started:
    """A process we started, with its log file (or its pty's byte count)."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], log: Path | None,
                 master_fd: int | None = None, record: Path | None = None) -> None:
        self.name = name
        self.popen = popen
        self.log = log
        self.pid = popen.pid
        self.ps = psutil.Process(popen.pid)
        self.pty_bytes = 0
        self._tail = b""  # the last screen bytes of a pty program: its only log when it crashes
        self._master = master_fd
        self.has_pty = master_fd is not None
        #: Where what the program writes to its terminal is kept (``<record>``: the bytes, capped at
        #: RECORD_MAX; ``<record>.index``: one "seconds offset" line per read), to see what it redraws.
        self._record = record
        if master_fd is not None:
            threading.Thread(target=self._drain, name=f"pty-{name}", daemon=True).start()

    def _drain(self) -> None:
        """Reads the pty like a terminal would (a full pty would block the program, skewing its cost)."""
        assert self._master is not None
        raw = index = None
        if self._record is not None:
            raw, index = open(self._record, "wb"), open(f"{self._record}.index", "w")  # noqa: SIM115
        t0 = time.monotonic()
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:
                return
            if not chunk:
                return
            if raw is not None and index is not None and self.pty_bytes < RECORD_MAX:
                index.write(f"{time.monotonic() - t0:.3f} {self.pty_bytes}\n")
                raw.write(chunk)
                raw.flush()
                index.flush()
            self.pty_bytes += len(chunk)
            self._tail = (self._tail + chunk)[-8192:]

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 1500) -> str:
        if self.log is None:
            text = _ANSI.sub("", self._tail.decode(errors="replace"))
            return " ".join(text.split())[-chars:] or "(no output)"
        if not self.log.exists():
            return "(no log)"
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self, grace_s: float = 3.0) -> None:
        """SIGTERM to its process group, SIGKILL after ``grace_s``."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(grace_s)
        if self._master is not None:
            with contextlib.suppress(OSError):
                os.close(self._master)
            self._master = None


def start(name: str, cmd: Sequence[str], logdir: Path, env: dict[str, str] | None = None) -> Started:
    """``cmd`` in a new session, stdout and stderr to ``logdir/<name>.log``."""
    log = logdir / f"{name}.log"
    with open(log, "wb") as fh:
        popen = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                 start_new_session=True, env={**os.environ, **(env or {})})
    return Started(name, popen, log)


def start_in_pty(name: str, cmd: Sequence[str], cols: int = 160, rows: int = 50,
                 env: dict[str, str] | None = None, cwd: Path | None = None, record: Path | None = None) -> Started:
    """``cmd`` on a fresh pty of ``cols`` x ``rows`` that is its controlling terminal; output is drained.
    ``cwd``: where it runs (``python -m gpuwatch`` there runs that checkout's gpuwatch)."""
    import fcntl
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    term_env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "COLUMNS": str(cols),
                "LINES": str(rows), **(env or {})}
    popen = subprocess.Popen([sys.executable, "-c", _PTY_SHIM, *cmd], stdin=slave, stdout=slave, stderr=slave,
                             env=term_env, close_fds=True, cwd=cwd)
    os.close(slave)
    return Started(name, popen, None, master_fd=master, record=record)


def thread_cpu_s(pid: int) -> dict[int, float]:
    """Seconds each thread of ``pid`` has been on a CPU, from its schedstat (exact: utime and stime are
    sampled at the timer tick). Threads that end are missing."""
    out: dict[int, float] = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return out


class Meter:
    """CPU (percent of one core) and RSS of one process and its children between ``begin`` and ``end``; the
    CPU of its reaped children and of each of its own threads apart."""

    def __init__(self, proc: Started) -> None:
        self.proc = proc
        self._t0 = self._c0 = self._k0 = 0.0
        self._threads0: dict[int, float] = {}
        self.children_cpu_pct: float | None = None
        self.threads_ms_per_s: dict[int, float] = {}
        self._bytes0 = 0
        self.cpu_pct: float | None = None
        self.tty_bytes_per_s: float | None = None
        self.rss_max_mib = 0.0
        self.rss_end_mib: float | None = None
        self.error: str | None = None

    def _cpu_and_rss(self) -> tuple[float, float, float]:
        """CPU seconds of the process and its children, of its children alone (reaped and running), and the
        RSS in MiB of the process and its children."""
        ps = self.proc.ps
        t = ps.cpu_times()
        kids = t.children_user + t.children_system
        rss = ps.memory_info().rss
        for child in ps.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                ct = child.cpu_times()
                kids += ct.user + ct.system
                rss += child.memory_info().rss
        return t.user + t.system + kids, kids, rss / 2**20

    def begin(self) -> None:
        self._t0 = time.monotonic()
        self._bytes0 = self.proc.pty_bytes
        try:
            self._threads0 = thread_cpu_s(self.proc.pid)
            self._c0, self._k0, rss = self._cpu_and_rss()
            self.rss_max_mib = rss
        except psutil.Error as exc:
            self.error = f"{self.proc.name} gone at start of window: {exc}"

    def sample(self) -> None:
        with contextlib.suppress(psutil.Error):
            self.rss_max_mib = max(self.rss_max_mib, self._cpu_and_rss()[2])

    def end(self) -> None:
        if self.error:
            return
        try:
            cpu, kids, rss = self._cpu_and_rss()
        except psutil.Error as exc:
            self.error = f"{self.proc.name} exited during the window: {exc}; log: {self.proc.log_tail(400)}"
            return
        wall = time.monotonic() - self._t0
        self.cpu_pct = round(100.0 * (cpu - self._c0) / wall, 3)
        self.children_cpu_pct = round(100.0 * (kids - self._k0) / wall, 3)
        threads = thread_cpu_s(self.proc.pid)
        self.threads_ms_per_s = {tid: round(1000 * (s - self._threads0.get(tid, 0.0)) / wall, 2)
                                 for tid, s in threads.items() if s > self._threads0.get(tid, 0.0)}
        if self.proc.has_pty:  # what the program wrote to its terminal inside the window, not at start-up
            self.tty_bytes_per_s = round((self.proc.pty_bytes - self._bytes0) / wall, 1)
        self.rss_end_mib = round(rss, 1)
        self.rss_max_mib = round(max(self.rss_max_mib, rss), 1)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"cpu_pct": self.cpu_pct, "rss_mib": self.rss_end_mib,
                                  "rss_max_mib": self.rss_max_mib}
        if self.children_cpu_pct is not None:
            out["children_cpu_pct"] = self.children_cpu_pct
        if self.proc.pty_bytes:
            out["pty_bytes"] = self.proc.pty_bytes
        if self.tty_bytes_per_s is not None:
            out["tty_bytes_per_s"] = self.tty_bytes_per_s
        if self.error:
            out["error"] = self.error
        return out


def measure_window(meters: Sequence[Meter], seconds: float, every_s: float = 1.0) -> None:
    """All ``meters`` over the same ``seconds`` of wall time, RSS sampled every ``every_s``."""
    for m in meters:
        m.begin()
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(every_s, left))
        for m in meters:
            m.sample()
    for m in meters:
        m.end()
