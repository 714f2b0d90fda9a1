"""Importing the NVML binding (nvidia-ml-py's ``pynvml``) without compiling it at every start.

Why: ``pynvml`` is one module of about 8 000 lines. An environment that installed it without bytecode (pip's
``--no-compile``, container images built with ``PYTHONDONTWRITEBYTECODE``, a read-only site-packages)
compiles it in every process that imports it: about 0.17 s of CPU, 14 MiB of compiler garbage until the
allocator hands it back, and 3 MiB it never does (measured on a development machine: the freed blocks sit
among live ones). Where no bytecode sits beside the module, its bytecode is compiled once into gpuwatch's
own cache directory and read from there afterwards; Python's import system checks it against the source's
size and modification time, so an upgraded binding is compiled again.

The cache is ``$CACHE_DIRECTORY`` (systemd's ``CacheDirectory=``), else ``$XDG_CACHE_HOME/gpuwatch``, else
``~/.cache/gpuwatch``. Where none can be written the binding is compiled in the process, as before.
``PYTHONDONTWRITEBYTECODE`` keeps bytecode out of source trees; this cache is not in one. A user who set
``PYTHONPYCACHEPREFIX`` chose where bytecode goes: the import is left to it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType

from gpuwatch.sources.base import SourceUnavailable

MODULE = "pynvml"
MISSING = "the NVML binding is not installed (pip install nvidia-ml-py)"


def cache_dir(env: Mapping[str, str]) -> Path | None:
    """Where gpuwatch keeps what it can compute again (None where there is no home to put it in)."""
    if env.get("CACHE_DIRECTORY"):
        return Path(env["CACHE_DIRECTORY"].split(":")[0])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "gpuwatch"
    try:
        return Path.home() / ".cache" / "gpuwatch"
    except RuntimeError:  # no home directory (a service user without one)
        return None


def needs_cache(origin: str | None) -> bool:
    """True when importing ``origin`` would compile it: a ``.py`` file with no bytecode beside it."""
    if not origin or not origin.endswith(".py") or sys.pycache_prefix is not None:
        return False
    try:
        return not os.path.exists(importlib.util.cache_from_source(origin))
    except (NotImplementedError, ValueError):  # an interpreter without bytecode caching
        return False


@contextlib.contextmanager
def bytecode_under(prefix: Path) -> Iterator[None]:
    """Imports inside read and write their bytecode under ``prefix`` (a mirror of the source's path).

    Python reads ``sys.pycache_prefix`` at each import, so the setting covers what is imported inside
    only; another thread importing meanwhile puts its bytecode there too, which costs it nothing."""
    saved = sys.pycache_prefix, sys.dont_write_bytecode
    sys.pycache_prefix, sys.dont_write_bytecode = str(prefix), False
    try:
        yield
    finally:
        sys.pycache_prefix, sys.dont_write_bytecode = saved


def import_pynvml(env: Mapping[str, str] = os.environ) -> ModuleType:
    """The binding, compiled at most once per version; :class:`SourceUnavailable` where it is missing."""
    loaded = sys.modules.get(MODULE)
    if loaded is not None:
        return loaded
    try:
        spec = importlib.util.find_spec(MODULE)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise SourceUnavailable(MISSING)
    base = cache_dir(env) if needs_cache(spec.origin) else None
    try:
        if base is None:
            return _load()
        prefix = base / "pycache"
        with contextlib.suppress(OSError):  # unwritable: the import compiles in the process, writes nothing
            prefix.mkdir(mode=0o700, parents=True, exist_ok=True)
        with bytecode_under(prefix):
            return _load()
    except ImportError:  # a binding that cannot load (a missing dependency of its own)
        raise SourceUnavailable(MISSING) from None


def _load() -> ModuleType:
    import pynvml

    return pynvml
