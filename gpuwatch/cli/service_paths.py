"""Can the unit's sandboxed dynamic user run this gpuwatch at all?

The unit runs as a fresh ``DynamicUser`` with ``PrivateTmp=`` and ``ProtectHome=read-only``: an
interpreter, venv or package under /tmp is invisible there, and one under a 0700 directory (``/root``, a
pyenv in a home) cannot be entered. systemd then fails with a bare "Permission denied" (status 203/EXEC or
an ImportError), so ``install-service`` looks before it writes.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from gpuwatch.model import files

PRIVATE_TMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))

FIX = ("install gpuwatch where every user can read it, from a system Python, e.g. "
       "'sudo /usr/bin/python3 -m venv /opt/gpuwatch && sudo /opt/gpuwatch/bin/pip install .' "
       "or 'sudo PIPX_HOME=/opt/pipx PIPX_BIN_DIR=/usr/local/bin pipx install --python /usr/bin/python3 .', "
       "then run that gpuwatch's install-service (or pass --exec PATH)")


def shebang_interpreter(script: Path) -> Path | None:
    """The interpreter a ``#!`` script names (console scripts of a venv point at its python)."""
    try:
        with files.open_binary(script) as fh:  # a regular file only: a FIFO here would block the read
            first = fh.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    return Path(words[0]) if words else None


def runtime_paths(exec_path: Path) -> list[Path]:
    """What the service must read to start: the entry point and its interpreter; for this very
    installation also the standard library and the packages gpuwatch imports."""
    paths = [exec_path]
    interpreter = shebang_interpreter(exec_path)
    if interpreter is not None:
        paths.append(interpreter)
    if interpreter is None or interpreter == Path(sys.executable):
        import prometheus_client

        import gpuwatch

        paths += [Path(sys.executable), Path(os.__file__).parent, Path(gpuwatch.__file__).parent,
                  Path(prometheus_client.__file__).parent]
    return paths


def _under(path: Path, roots: Iterable[Path]) -> Path | None:
    return next((r for r in roots if path == r or r in path.parents), None)


def problem(path: Path, private_tmp: Iterable[Path] = PRIVATE_TMP) -> str | None:
    """Why the dynamic user cannot use ``path`` (following symlinks), or None."""
    for candidate in (path, Path(os.path.realpath(path))):
        tmp = _under(candidate, private_tmp)
        if tmp is not None:
            return f"{candidate} is under {tmp}, which the service cannot see (PrivateTmp=)"
    real = Path(os.path.realpath(path))
    try:
        for directory in reversed(real.parents):
            mode = directory.stat().st_mode
            if not mode & stat.S_IXOTH:
                return (f"{path} lies under {directory} (mode {stat.S_IMODE(mode):04o}), which the service's "
                        f"dynamic user cannot enter")
        mode = real.stat().st_mode
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    wanted = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    if mode & wanted != wanted:
        return f"{real} (mode {stat.S_IMODE(mode):04o}) is not readable by the service's dynamic user"
    return None


def problems(paths: Iterable[Path]) -> list[str]:
    """Every distinct problem, in the order found."""
    found: list[str] = []
    for path in paths:
        why = problem(path)
        if why is not None and why not in found:
            found.append(why)
    return found
