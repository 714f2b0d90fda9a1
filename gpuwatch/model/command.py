"""The part of a command line that tells processes apart: the label every view shows for a process.

``/opt/torch/.venv/bin/python3 -B -c from multiprocessing.spawn import spawn_main; spawn_main(...)`` is
the same 60 characters for every worker of a service: the interpreter's path and flags say nothing. So
interpreters lose their path and flags and show the script or module with its arguments, and
multiprocessing's helpers are named for what they are. A worker is named by its parent's script (where
the Snapshot has the parent: a GPU process or a feeder) and its place among its siblings, oldest first
(``serve.py [mp worker 2]``; ``[mp worker 2 of 554]`` where the parent is not in the Snapshot), so two
workers of one launcher never read alike. Computed here, on the model, so the dashboard, its details
screen and ``gpuwatch snapshot`` agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

_PYTHON = re.compile(r"^(?:python|pypy)[\d.]*m?$")
#: Interpreter options that take the next word as their value (``-X importtime``, ``-W ignore``).
_PYTHON_OPTS_WITH_VALUE = frozenset({"-X", "-W", "--check-hash-based-pycs"})
MP_WORKER = "mp worker"


class _Proc(Protocol):
    """What a label is made of: a GPU process (``ProcessSample``) or a feeder (``FeederSample``)."""

    @property
    def pid(self) -> int: ...
    @property
    def name(self) -> str | None: ...
    @property
    def cmdline(self) -> str | None: ...


class _Sampled(_Proc, Protocol):
    """A GPU process (``ProcessSample``): its parent and start time tell its siblings apart."""

    @property
    def ppid(self) -> int | None: ...
    @property
    def create_time(self) -> float | None: ...


def _mp_role(code: str, rest: list[str]) -> str | None:
    """``-c`` code that multiprocessing runs: a worker, the fork server or the resource tracker."""
    if "multiprocessing.spawn" in code or "--multiprocessing-fork" in rest:
        return MP_WORKER
    if "multiprocessing.forkserver" in code:
        return "mp forkserver"
    if "multiprocessing.resource_tracker" in code:
        return "mp resource tracker"
    return None


def _python_args(args: list[str]) -> list[str]:
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-c", "-m", "-"):
        i += 2 if args[i] in _PYTHON_OPTS_WITH_VALUE else 1
    return args[i:]


def mp_role(cmdline: str | None) -> str | None:
    """``mp worker``, ``mp forkserver`` or ``mp resource tracker`` for multiprocessing's own processes."""
    words = (cmdline or "").split()
    if not words or not _PYTHON.match(words[0].rsplit("/", 1)[-1]):
        return None
    rest = _python_args(words[1:])
    return _mp_role(" ".join(rest[1:]), rest) if rest[:1] == ["-c"] else None


def short_command(p: _Proc) -> str:
    """The command without the interpreter's path and flags (multiprocessing's helpers by their role alone)."""
    words = (p.cmdline or "").split()
    if not words:
        return p.name or "-"
    program = words[0].rsplit("/", 1)[-1]
    if not _PYTHON.match(program):
        return " ".join([program, *words[1:]])
    rest = _python_args(words[1:])
    if not rest:
        return program
    if rest[0] == "-m" and len(rest) > 1:
        return " ".join(["-m", *rest[1:]])
    if rest[0] == "-c":
        code = " ".join(rest[1:])
        role = _mp_role(code, rest)
        return f"[{role}]" if role else f"{program} -c {code}"
    return " ".join([rest[0].rsplit("/", 1)[-1], *rest[1:]])


def _script(p: _Proc) -> str:
    """A parent's short name: its script or module, without arguments (``serve.py``, ``-m vllm...``)."""
    words = short_command(p).split()
    if words[:1] == ["-m"] and len(words) > 1:
        return f"-m {words[1]}"
    return words[0] if words else "-"


def command_labels(processes: Iterable[_Sampled], others: Iterable[_Proc] = ()) -> dict[int, str]:
    """The label of each of ``processes`` by pid; ``others`` (feeders) can name a parent. Siblings are
    numbered oldest first (``create_time``), then by pid."""
    procs = {p.pid: p for p in processes}
    known: dict[int, _Proc] = {**{o.pid: o for o in others}, **procs}
    ppids = {pid: p.ppid for pid, p in procs.items()}
    created = {pid: p.create_time for pid, p in procs.items()}
    labels = {pid: short_command(p) for pid, p in procs.items()}
    siblings: dict[tuple[int | None, str], list[int]] = {}
    for pid, p in procs.items():
        role = mp_role(p.cmdline)
        if role is not None:
            siblings.setdefault((ppids.get(pid), role), []).append(pid)
    for (ppid, role), pids in siblings.items():
        pids.sort(key=lambda pid: (created.get(pid) or 0.0, pid))
        for n, pid in enumerate(pids, 1):
            nth = f"{role} {n}" if role == MP_WORKER else role
            parent = known.get(ppid) if ppid is not None else None
            if parent is not None and mp_role(parent.cmdline) is None:
                labels[pid] = f"{_script(parent)} [{nth}]"
            else:
                labels[pid] = f"[{nth} of {ppid}]" if ppid is not None else f"[{nth}]"
    return labels
