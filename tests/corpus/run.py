"""Runs the corpus: each case through the commands a user would run on it, in child processes with a memory
limit and a deadline, and classifies every run as a clean error, a traceback, a hang or accepted (exit 0
where an error was due). ``python -m corpus.run`` (from tests/) runs them all and prints the counts."""

from __future__ import annotations

import gzip
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from corpus import forkserver
from corpus.cases import BUNDLED, HTTP, RUNS, cases, materialise, special_files

MEMORY_LIMIT = 1 << 30  # address space, bytes: a gigabyte
#: The promise: no command's resident memory (peak RSS) goes over 200 MB on any input here.
MEMORY_BOUND_MIB = 200e6 / 2**20
#: Characters that steer a terminal; runs that check their output (``check_raw``) must print none raw (CSV's
#: CRLF line ends excepted).
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
DEADLINE_S = 30.0
MAX_LINES = 3
#: Runs the CLI and writes its own peak RSS (VmHWM) where $HWM_FILE says.
HWM = Path(forkserver.HWM)
MAX_LINE_CHARS = 500
#: What the command line prints for an exception it did not expect: a bug, counted with the tracebacks.
INTERNAL_ERROR = "internal error:"
#: The warm interpreter gpuwatch commands are forked from, one per test process.
WARM = forkserver.WarmInterpreter()
VALID_PAGE = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-0",modelName="H200"} 50\n' * 40


@dataclass(frozen=True)
class Outcome:
    kind: str
    name: str
    returncode: int | None
    output: str
    seconds: float
    max_rss_mib: float
    hung: bool
    names: str = ""
    #: Most message lines a clean error may have (a few cases summarise thousands of problems in more).
    max_lines: int = MAX_LINES
    #: The input is valid (text from outside to be shown): exit 0 is right, and no raw control character.
    expect_ok: bool = False
    #: A raw control character was printed (checked only where the case asks for it).
    raw_output: bool = False

    @property
    def over_memory(self) -> bool:
        return self.max_rss_mib > MEMORY_BOUND_MIB

    @property
    def traceback(self) -> bool:
        return any(s in self.output for s in ("Traceback", "MemoryError", INTERNAL_ERROR, "Exception ignored"))

    @property
    def lines(self) -> list[str]:
        """The message lines; argparse's usage block (``usage:`` and its indented continuation) is not
        counted: it comes before the one error line of every flag mistake."""
        out, in_usage = [], False
        for line in self.output.splitlines():
            in_usage = line.startswith("usage:") or (in_usage and line.startswith(" "))
            if line.strip() and not in_usage:
                out.append(line)
        return out

    @property
    def names_the_input(self) -> bool:
        """The message says which file, flag, variable (or, for a page, which exporter) is wrong."""
        needle = self.names or ("127.0.0.1" if self.kind.startswith("dcgm") else self.name)
        # a long path is cut in the middle in an error line: its end (the file) is what must be named
        return needle in self.output or ("/" in needle and needle[-40:] in self.output)

    @property
    def accepted(self) -> bool:
        return not self.hung and self.returncode == 0 and not self.expect_ok

    @property
    def clean(self) -> bool:
        """One clear error: non-zero exit, no traceback, a few short lines naming the input, in time, within
        the memory bound, nothing raw that steers a terminal; for valid input, exit 0 on the same terms."""
        if self.hung or self.traceback or self.over_memory or self.raw_output:
            return False
        if self.expect_ok:
            return self.returncode == 0
        return (self.returncode not in (None, 0) and self.names_the_input
                and 1 <= len(self.lines) <= self.max_lines and all(len(x) <= MAX_LINE_CHARS for x in self.lines))

    @property
    def verdict(self) -> str:
        return ("hang" if self.hung else "traceback" if self.traceback else "memory" if self.over_memory
                else "escapes" if self.raw_output else "accepted" if self.accepted
                else "clean" if self.clean else "unclear")


class _Handler(BaseHTTPRequestHandler):
    body = b""
    behaviour = ""

    def do_GET(self) -> None:
        b = self.behaviour
        if b == "never-answers":
            time.sleep(DEADLINE_S * 2)
            return
        if b == "redirect-loop":
            self.send_response(302)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if b == "error-500-html":
            page = b"<html><body><h1>500 Internal Server Error</h1></body></html>"
            self.send_response(500)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        if b == "huge-header":
            self.send_response(200)
            self.send_header("X-Big", "a" * (1 << 20))
            self.send_header("Content-Length", str(len(VALID_PAGE)))
            try:
                self.end_headers()
                self.wfile.write(VALID_PAGE)
            except OSError:  # the client stopped reading the header, as it should
                pass
            return
        body = self.body if not b else VALID_PAGE
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        if b == "gzip-bomb":
            body = gzip_bomb()
            self.send_header("Content-Encoding", "gzip")
        if b == "content-length-lies":
            self.send_header("Content-Length", "100000")
        elif b != "endless-body":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            if b == "headers-then-silence":
                time.sleep(DEADLINE_S * 2)
            elif b == "drips-a-byte-a-second":
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1.0)
            elif b == "endless-body":
                while True:
                    self.wfile.write(b"# more\n" * 1000)
            elif b == "content-length-lies":
                self.wfile.write(body[:10])
                self.wfile.flush()
                time.sleep(DEADLINE_S * 2)
            elif b == "closes-mid-body":
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
            else:
                self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


_BODY_CACHE: dict[str, bytes] = {}


def gzip_bomb() -> bytes:
    """256 MiB of comment lines in about 250 KiB, made once (before the server answers, not per request)."""
    if "bomb" not in _BODY_CACHE:
        _BODY_CACHE["bomb"] = gzip.compress(b"#" * (256 << 20), compresslevel=9)
    return _BODY_CACHE["bomb"]


@contextmanager
def serving(body: bytes, behaviour: str = "") -> Iterator[str]:
    """A dcgm-exporter stand-in on 127.0.0.1: answers every GET with ``body``, or misbehaves as named."""
    handler = type("Handler", (_Handler,), {"body": body, "behaviour": behaviour})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    # shutdown() waits for the loop to look up: at the default poll (0.5 s), half a second of every case
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def _commands(kind: str, path: Path, url: str | None) -> list[list[str]]:
    gw = [sys.executable, "-m", "gpuwatch"]
    if kind == "config":
        return [[*gw, "daemon", "--check-config", "--config", str(path)]]
    if kind == "rules":
        return [[*gw, "rules", "check", str(path)]]
    if kind == "recordings":  # every command that reads a recording
        return [[*gw, "rules", "test", "--replay", str(path)], [*gw, "doctor", "--json", "--replay", str(path)],
                [*gw, "snapshot", "--json", "--replay", str(path), "--at", "3600"]]
    return [[*gw, "snapshot", "--json", "--interval", "0.1", "--dcgm", str(url)]]


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _env(workdir: Path, extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
    env["XDG_STATE_HOME"] = str(workdir / "state")
    env["XDG_CONFIG_HOME"] = str(workdir / "config-home")  # no user config is read by accident
    env.update(extra)
    return env


def run_one(kind: str, name: str, argv: list[str], workdir: Path, env: dict[str, str], names: str = "",
            stdout: str | None = None, max_lines: int = MAX_LINES, expect_ok: bool = False,
            check_raw: bool = False, fresh: bool = False) -> Outcome:
    """One child process, classified (with ``check_raw``, its standard output and error are searched for raw
    control characters as well). A gpuwatch command is forked from the warm interpreter (corpus/forkserver.py)
    unless ``fresh`` or its environment changes how Python starts; anything else is a fresh process."""
    captured = tempfile.TemporaryFile() if check_raw and not stdout else None  # noqa: SIM115 - closed below
    out_fd = os.open(stdout if stdout else os.devnull, os.O_WRONLY) if not captured else captured.fileno()
    stdin_fd = os.open(os.devnull, os.O_RDONLY)
    try:
        with tempfile.TemporaryFile() as err:
            started = time.monotonic()
            # ru_maxrss is no measure of a child (Linux carries the forking runner's peak into it): the
            # command writes its own peak (VmHWM) through tests/hwm.py
            hwm = tempfile.NamedTemporaryFile(delete=False)  # noqa: SIM115 - removed below
            hwm.close()
            if argv[:3] == [sys.executable, "-m", "gpuwatch"]:
                argv = [sys.executable, str(HWM), *argv[3:]]
            env = {**(env if env is not None else os.environ), "HWM_FILE": hwm.name}
            warm = (not fresh and argv[:2] == [sys.executable, str(HWM)]
                    and not forkserver.needs_fresh(env, WARM.env))
            if warm:
                pid = WARM.spawn(argv[2:], env, str(workdir), MEMORY_LIMIT, [stdin_fd, out_fd, err.fileno()])
            else:
                pid = subprocess.Popen(argv, stdin=stdin_fd, stdout=out_fd, stderr=err, env=env,
                                       preexec_fn=_limit, cwd=workdir, start_new_session=True).pid
            hung = threading.Event()

            def kill() -> None:
                hung.set()
                with suppress(ProcessLookupError):  # it ended as the deadline came
                    os.killpg(pid, signal.SIGKILL)

            timer = threading.Timer(DEADLINE_S, kill)
            timer.start()
            if warm:
                status, maxrss_kib = WARM.wait()
            else:
                _, status, usage = os.wait4(pid, 0)
                maxrss_kib = usage.ru_maxrss
            timer.cancel()
            returncode = os.waitstatus_to_exitcode(status)
            seconds = time.monotonic() - started
            err.seek(0)
            output = err.read().decode("utf-8", "replace")
            printed = output
            if captured is not None:
                captured.seek(0)
                printed += captured.read().decode("utf-8", "replace")
    finally:
        os.close(stdin_fd)
        if captured is not None:
            captured.close()
        else:
            os.close(out_fd)
    raw = check_raw and RAW_CONTROLS.search(printed.replace("\r\n", "\n")) is not None
    try:
        peak = int(Path(hwm.name).read_text() or 0) / 1024 or maxrss_kib / 1024
    except (OSError, ValueError):
        peak = maxrss_kib / 1024
    Path(hwm.name).unlink(missing_ok=True)
    return Outcome(kind, name, None if hung.is_set() else returncode, output, seconds, peak,
                   hung.is_set(), names, max_lines, expect_ok, raw)


def run_case(kind: str, name: str, workdir: Path, fresh: bool = False) -> list[Outcome]:
    """Every run of one case (a recording is read by three commands); ``fresh``: each in a new interpreter."""
    if kind == "commands":
        run = RUNS[name]
        d = workdir / "special"
        special_files(d)
        argv = [sys.executable, "-m", "gpuwatch", *(a.replace("{d}", str(d)) for a in run.argv)]
        env = _env(workdir, tuple((k, v.replace("{d}", str(d))) for k, v in run.env))
        names = run.names.replace("{d}", str(d))
        return [run_one(kind, name, argv, workdir, env, names, run.stdout, run.max_lines, run.expect_ok,
                        run.check_raw, fresh)]
    if kind == "dcgm-behaviours":
        if name == "gzip-bomb":
            gzip_bomb()
        with serving(b"", name) as url:
            argv = [sys.executable, "-m", "gpuwatch", "snapshot", "--json", "--interval", "0.1", "--dcgm", url]
            return [run_one(kind, name, argv, workdir, _env(workdir), fresh=fresh)]
    path = materialise(kind, name, workdir)
    with serving(path.read_bytes()) if kind == "dcgm" else nullcontext(None) as url:  # only a page is served
        return [run_one(kind, name, argv, workdir, _env(workdir), fresh=fresh) for argv in _commands(kind, path, url)]


# --- HTTP: one daemon, every request; a 5xx or a traceback in its log is a failure -------------------------

@dataclass(frozen=True)
class HttpOutcome:
    name: str
    status: int | None  # None: no answer (closed), or the deadline passed
    hung: bool
    seconds: float

    @property
    def verdict(self) -> str:
        return "hang" if self.hung else "traceback" if self.status is not None and self.status >= 500 else "clean"


class HttpDaemon:
    """``gpuwatch daemon`` on the bundled recording, on a free loopback port, with its log kept."""

    def __init__(self, workdir: Path) -> None:
        self.log = workdir / "http-daemon.log"
        argv = [sys.executable, "-m", "gpuwatch", "daemon", "--replay", BUNDLED, "--listen", "127.0.0.1:0",
                "--state-dir", str(workdir / "http-state"), "--speed", "10"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.log.open("wb"),
                                     env=_env(workdir), cwd=workdir)
        deadline = time.monotonic() + DEADLINE_S
        while not (m := re.search(r"serving on http://[\d.]+:(\d+)", self.log.read_text(errors="replace"))):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)
        self.port = int(m.group(1))

    def send(self, name: str) -> HttpOutcome:
        started = time.monotonic()
        got = b""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=DEADLINE_S) as s:
                s.sendall(HTTP[name])
                while b"\r\n" not in got and (chunk := s.recv(4096)):
                    got += chunk
        except TimeoutError:
            return HttpOutcome(name, None, True, time.monotonic() - started)
        except OSError:
            pass  # reset: the daemon refused to read more, which is an answer
        m = re.match(rb"HTTP/\d\.\d (\d{3})", got)
        return HttpOutcome(name, int(m.group(1)) if m else None, False, time.monotonic() - started)

    def peak_rss_mib(self) -> float:
        """The daemon's peak resident memory so far (VmHWM), read before it is stopped."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        m = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
        return int(m.group(1)) / 1024 if m else 0.0

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.log.read_text(errors="replace")


def main() -> int:
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, name in cases():
            for o in run_case(kind, name, Path(tmp)):
                outcomes.append(o)
                first = o.lines[0][:150] if o.lines else ""
                print(f"{o.verdict:9} {o.seconds:5.1f}s {o.max_rss_mib:6.0f}MiB rc={o.returncode} {kind}/{name}: "
                      f"{first}")
        daemon = HttpDaemon(Path(tmp))
        http = [daemon.send(name) for name in sorted(HTTP)]
        daemon_mib = daemon.peak_rss_mib()
        log = daemon.stop()
    for h in http:
        print(f"{h.verdict:9} {h.seconds:5.1f}s status={h.status} http/{h.name}")
    counts = {v: sum(o.verdict == v for o in outcomes) + sum(h.verdict == v for h in http)
              for v in ("clean", "traceback", "hang", "memory", "escapes", "accepted", "unclear")}
    if daemon_mib > MEMORY_BOUND_MIB:
        counts["memory"] += 1
    if "Traceback" in log:
        counts["traceback"] += 1
        print(log)
    print(f"runs {len(outcomes) + len(http)}, " + ", ".join(f"{k} {v}" for k, v in counts.items())
          + f"; slowest {max(o.seconds for o in outcomes):.1f} s, largest "
          f"{max(o.max_rss_mib for o in outcomes):.0f} MiB (bound {MEMORY_BOUND_MIB:.0f} MiB = 200 MB), "
          f"the HTTP daemon's peak {daemon_mib:.0f} MiB")
    return 0 if counts["clean"] == len(outcomes) + len(http) and daemon_mib <= MEMORY_BOUND_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
