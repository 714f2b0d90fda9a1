"""Runs one corpus case through the command a user would run on such a file, in a child process with a
memory limit and a deadline, and classifies the outcome. ``python -m corpus.run`` (from tests/) runs them
all and prints the counts: runs, clean errors, tracebacks, hangs."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from corpus.cases import cases, materialise

MEMORY_LIMIT = 1 << 30  # address space, bytes: a gigabyte
DEADLINE_S = 30.0
MAX_LINES = 3
MAX_LINE_CHARS = 500


@dataclass(frozen=True)
class Outcome:
    kind: str
    name: str
    returncode: int | None
    output: str
    seconds: float
    max_rss_mib: float
    hung: bool

    @property
    def traceback(self) -> bool:
        return "Traceback" in self.output or "MemoryError" in self.output

    @property
    def lines(self) -> list[str]:
        return [line for line in self.output.splitlines() if line.strip()]

    @property
    def names_the_input(self) -> bool:
        """The message says which file (or, for a page, which exporter) is wrong."""
        return ("127.0.0.1" if self.kind == "dcgm" else self.name) in self.output

    @property
    def clean(self) -> bool:
        """One clear error: non-zero exit, no traceback, a few short lines naming the input, in time."""
        return (not self.hung and not self.traceback and self.returncode not in (None, 0) and self.names_the_input
                and 1 <= len(self.lines) <= MAX_LINES and all(len(x) <= MAX_LINE_CHARS for x in self.lines))


@contextmanager
def serving(body: bytes) -> Iterator[str]:
    """A dcgm-exporter stand-in on 127.0.0.1 that answers every GET with ``body``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def _command(kind: str, path: Path, url: str | None) -> list[str]:
    gw = [sys.executable, "-m", "gpuwatch"]
    if kind == "config":
        return [*gw, "daemon", "--check-config", "--config", str(path)]
    if kind == "rules":
        return [*gw, "rules", "check", str(path)]
    if kind == "recordings":
        return [*gw, "rules", "test", "--replay", str(path)]
    return [*gw, "snapshot", "--json", "--interval", "0.1", "--dcgm", str(url)]


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_case(kind: str, name: str, workdir: Path) -> Outcome:
    path = materialise(kind, name, workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
    env["XDG_STATE_HOME"] = str(workdir / "state")
    with serving(path.read_bytes() if kind == "dcgm" else b"") as url, tempfile.TemporaryFile() as out:
        started = time.monotonic()
        proc = subprocess.Popen(_command(kind, path, url), stdout=subprocess.DEVNULL, stderr=out, env=env,
                                preexec_fn=_limit, cwd=workdir)
        hung = threading.Event()

        def kill() -> None:
            hung.set()
            proc.send_signal(signal.SIGKILL)

        timer = threading.Timer(DEADLINE_S, kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        out.seek(0)
        output = out.read().decode("utf-8", "replace")
    return Outcome(kind, name, None if hung.is_set() else proc.returncode, output, seconds,
                   usage.ru_maxrss / 1024, hung.is_set())


def main() -> int:
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, name in cases():
            o = run_case(kind, name, Path(tmp))
            outcomes.append(o)
            verdict = "hang" if o.hung else "traceback" if o.traceback else "clean" if o.clean else "unclear"
            first = o.lines[0][:150] if o.lines else ""
            print(f"{verdict:9} {o.seconds:5.1f}s {o.max_rss_mib:6.0f}MiB rc={o.returncode} {kind}/{name}: {first}")
    runs = len(outcomes)
    clean = sum(o.clean for o in outcomes)
    tracebacks = sum(o.traceback and not o.hung for o in outcomes)
    hangs = sum(o.hung for o in outcomes)
    print(f"runs {runs}, clean errors {clean}, tracebacks {tracebacks}, hangs {hangs}, "
          f"other {runs - clean - tracebacks - hangs}; slowest {max(o.seconds for o in outcomes):.1f} s, "
          f"largest {max(o.max_rss_mib for o in outcomes):.0f} MiB")
    return 0 if clean == runs else 1


if __name__ == "__main__":
    sys.exit(main())
