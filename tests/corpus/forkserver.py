"""A warm interpreter that forks one child per corpus run, so a run pays for its command, not for importing
gpuwatch again (about 0.4 s of CPU of a ~0.55 s run, 745 runs a suite).

The child is what a fresh ``python tests/hwm.py ARGS`` would be, set up in the order the kernel and Python
would: a new session (the runner kills its process group at the deadline), the memory limit, the working
directory, the environment, standard input, output and error from the descriptors the runner passed, then the
command line through ``tests/hwm.py`` and Python's normal shutdown (atexit, flushing, the peak-RSS file).
What a fork cannot reproduce is left to a fresh interpreter by the runner (``needs_fresh``): an environment
that changes how Python itself starts (``PYTHON*``, the locale). Its peak RSS counts the pre-imported modules
the command would have imported anyway, plus the few it would not: a bound checked this way is conservative.

Protocol on one AF_UNIX SOCK_SEQPACKET socket, one request at a time: the runner sends four descriptors,
stdin, stdout, stderr and a file holding the JSON request {argv, env, cwd, limit_as} (an argument list can be
megabytes, more than a packet holds); the server answers {"pid"} once the child runs and {"status",
"maxrss_kib"} once it has ended."""

from __future__ import annotations

import atexit
import importlib
import json
import os
import resource
import runpy
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping

HWM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hwm.py")
#: What every corpus command imports (the CLI, config, rules, recordings, the doctor, the sampler's sources);
#: not the dashboard's Textual, which few runs load and which would add 21 MiB to every run's peak.
WARM_MODULES = ("gpuwatch.cli.main", "gpuwatch.cli.common", "gpuwatch.daemon.parts", "gpuwatch.alerts.engine",
                "gpuwatch.model.recording", "gpuwatch.doctor", "gpuwatch.runtime.build")
#: Variables read by the interpreter as it starts (encoding, flags, paths): a fork would not see them.
STARTUP_VARIABLES = ("PYTHON", "LC_", "LANG")


def needs_fresh(env: Mapping[str, str], base: Mapping[str, str]) -> bool:
    """A run whose environment differs from the server's in a variable Python reads only as it starts."""
    keys = set(env) | set(base)
    return any(k.startswith(STARTUP_VARIABLES) and env.get(k) != base.get(k) for k in keys)


def _become(request: dict[str, object], fds: list[int]) -> None:
    """In the child: turn into the requested run, then run it; ends with SystemExit, never returns."""
    os.setsid()
    limit = int(request["limit_as"])  # type: ignore[call-overload]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.chdir(str(request["cwd"]))
    os.environ.clear()
    os.environ.update(request["env"])  # type: ignore[arg-type]
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.argv = [HWM, *request["argv"]]  # type: ignore[misc]
    runpy.run_path(HWM, run_name="__main__")
    sys.exit(0)


def serve(sock: socket.socket) -> None:
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 16, 4)
        if not message:
            return
        with os.fdopen(fds.pop(), "rb") as body:
            request = json.load(body)
        pid = os.fork()
        if pid == 0:
            sock.close()
            _become(request, fds)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        _, status, usage = os.wait4(pid, 0)
        sock.send(json.dumps({"status": status, "maxrss_kib": usage.ru_maxrss}).encode())


class WarmInterpreter:
    """The runner's side: one server per test process, started at first use, stopped with the process."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        #: The server's own environment, as the runner's less gpuwatch's variables.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}

    def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._proc = subprocess.Popen([sys.executable, __file__, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=self.env)
        theirs.close()
        self._sock = ours
        atexit.register(self.stop)  # waited for, so its CPU time counts in the test process's children

    def spawn(self, argv: list[str], env: Mapping[str, str], cwd: str, limit_as: int, fds: list[int]) -> int:
        """Starts one run (``argv`` after ``hwm.py``) and returns its pid, which leads its own process group."""
        if self._sock is None:
            self.start()
        assert self._sock is not None
        with tempfile.TemporaryFile() as body:
            body.write(json.dumps({"argv": argv, "env": dict(env), "cwd": cwd, "limit_as": limit_as}).encode())
            body.seek(0)
            socket.send_fds(self._sock, [b"run"], [*fds, body.fileno()])
        return int(self._answer()["pid"])

    def wait(self) -> tuple[int, int]:
        """The run's wait status and its peak RSS in KiB as the kernel counts it, once it has ended."""
        answer = self._answer()
        return int(answer["status"]), int(answer["maxrss_kib"])

    def _answer(self) -> dict[str, int]:
        assert self._sock is not None and self._proc is not None
        message = self._sock.recv(1 << 16)
        if not message:
            raise RuntimeError(f"the corpus's fork server ended (exit {self._proc.wait()})")
        return json.loads(message)  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self._sock is not None and self._proc is not None:
            self._sock.close()
            self._proc.wait(10)
            self._sock = None


if __name__ == "__main__":
    sys.path[0] = os.path.dirname(HWM)  # as for `python tests/hwm.py`: tests/ first on the path
    for name in WARM_MODULES:
        importlib.import_module(name)
    serve(socket.socket(fileno=int(sys.argv[1])))
