"""The part of a command line that tells processes apart, for the COMMAND column.

``/opt/torch/.venv/bin/python3 -B -c from multiprocessing.spawn import spawn_main; spawn_main(...)`` is
the same 60 characters for every worker of a service: the interpreter's path and flags say nothing. So
interpreters lose their path and flags and show the script or module with its arguments, and
multiprocessing's helpers are named for what they are, with the parent that started them.
"""

from __future__ import annotations

import re

from gpuwatch.model.snapshot import ProcessSample

_PYTHON = re.compile(r"^(?:python|pypy)[\d.]*m?$")
#: Interpreter options that take the next word as their value (``-X importtime``, ``-W ignore``).
_PYTHON_OPTS_WITH_VALUE = frozenset({"-X", "-W", "--check-hash-based-pycs"})
_MP_CALL = re.compile(r"(spawn_main|main)\(([^)]*)\)")


def _multiprocessing(code: str, rest: list[str], ppid: int | None) -> str | None:
    """``-c`` code that multiprocessing runs: a worker, the fork server or the resource tracker."""
    parent = f" of {ppid}" if ppid is not None else ""
    if "multiprocessing.spawn" in code or "--multiprocessing-fork" in rest:
        call = _MP_CALL.search(code)
        return f"[mp worker{parent}] {call.group(0) if call else code}"
    if "multiprocessing.forkserver" in code:
        return f"[mp forkserver{parent}]"
    if "multiprocessing.resource_tracker" in code:
        return f"[mp resource tracker{parent}]"
    return None


def _python(interpreter: str, args: list[str], ppid: int | None) -> str:
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-c", "-m", "-"):
        i += 2 if args[i] in _PYTHON_OPTS_WITH_VALUE else 1
    rest = args[i:]
    if not rest:
        return interpreter
    if rest[0] == "-m" and len(rest) > 1:
        return " ".join(["-m", *rest[1:]])
    if rest[0] == "-c":
        code = " ".join(rest[1:])
        return _multiprocessing(code, rest, ppid) or f"{interpreter} -c {code}"
    script = rest[0].rsplit("/", 1)[-1]
    return " ".join([script, *rest[1:]])


def display_command(p: ProcessSample) -> str:
    """What the COMMAND column shows for ``p`` (the full command line stays in the details screen)."""
    if not p.cmdline:
        return p.name or "-"
    words = p.cmdline.split()
    program = words[0].rsplit("/", 1)[-1]
    if _PYTHON.match(program):
        return _python(program, words[1:], p.ppid)
    return " ".join([program, *words[1:]])
