"""The NVML binding is compiled at most once: where it has no bytecode beside it, its bytecode is kept in
gpuwatch's cache directory and read from there at every later start.

Each start is a fresh interpreter (as a daemon or a dashboard is) over a stand-in ``pynvml.py`` installed
without bytecode, with ``PYTHONDONTWRITEBYTECODE`` set as container images set it.
"""

from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwatch.sources.nvml.binding import cache_dir

ROOT = Path(__file__).resolve().parents[3]

#: One start: import the binding through gpuwatch and say where its code came from. With ``forbid`` set,
#: compiling the binding's source in this process fails the start.
START = """
import importlib.machinery, json, os, sys
if os.environ.get("FORBID_COMPILE"):
    real = importlib.machinery.SourceFileLoader.source_to_code
    def refuse(self, data, path, *a, **k):
        if path.endswith("pynvml.py"):
            raise SystemExit("compiled pynvml.py in the process")
        return real(self, data, path, *a, **k)
    importlib.machinery.SourceFileLoader.source_to_code = refuse
from gpuwatch.sources.nvml.binding import import_pynvml
nvml = import_pynvml()
print(json.dumps({"version": nvml.VERSION, "cached": nvml.__cached__, "prefix": sys.pycache_prefix,
                  "dont_write": sys.dont_write_bytecode}))
"""


def _install(site: Path, version: str) -> Path:
    site.mkdir(exist_ok=True)
    source = site / "pynvml.py"
    source.write_text(f"VERSION = {version!r}\n" + "def nvmlInit():\n    pass\n" * 50)
    return source


def _start(site: Path, cache_home: Path, *, forbid_compile: bool = False) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("CACHE_DIRECTORY", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=str(cache_home))
    if forbid_compile:
        env["FORBID_COMPILE"] = "1"
    done = subprocess.run([sys.executable, "-c", START], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_binding_without_bytecode_is_compiled_once_and_read_from_the_cache_at_every_later_start(tmp_path):
    site, home = tmp_path / "site", tmp_path / "cache"
    _install(site, "13.0")
    first = _start(site, home)
    cached = Path(str(first["cached"]))
    assert cached.is_relative_to(home / "gpuwatch" / "pycache") and cached.exists()
    assert not (site / "__pycache__").exists()  # the source tree is left as it was
    assert (first["prefix"], first["dont_write"]) == (None, True)  # the process's own settings are back

    again = _start(site, home, forbid_compile=True)
    assert again == first


def test_an_upgraded_binding_is_compiled_again(tmp_path):
    site, home = tmp_path / "site", tmp_path / "cache"
    source = _install(site, "13.0")
    _start(site, home)
    _install(site, "13.1.0")
    os.utime(source, (source.stat().st_atime, source.stat().st_mtime + 5))
    assert _start(site, home)["version"] == "13.1.0"
    assert _start(site, home, forbid_compile=True)["version"] == "13.1.0"


def test_a_binding_with_its_own_bytecode_is_imported_as_it_is_and_nothing_is_cached(tmp_path):
    site, home = tmp_path / "site", tmp_path / "cache"
    source = _install(site, "13.0")
    py_compile.compile(str(source))
    started = _start(site, home, forbid_compile=True)
    assert Path(str(started["cached"])).parent == site / "__pycache__"
    assert not home.exists()


def test_where_the_cache_cannot_be_written_the_binding_is_compiled_in_the_process_as_before(tmp_path):
    site, home = tmp_path / "site", tmp_path / "cache-is-a-file"
    _install(site, "13.0")
    home.write_text("not a directory")
    assert _start(site, home)["version"] == "13.0"
    assert home.read_text() == "not a directory"


@pytest.mark.parametrize(("env", "expected"), [
    ({"CACHE_DIRECTORY": "/var/cache/gpuwatch:/var/cache/other", "XDG_CACHE_HOME": "/home/u/.cache"},
     Path("/var/cache/gpuwatch")),
    ({"XDG_CACHE_HOME": "/home/u/.cache"}, Path("/home/u/.cache/gpuwatch")),
    ({}, Path.home() / ".cache" / "gpuwatch"),
])
def test_the_cache_is_systemds_cache_directory_else_the_users(env, expected):
    assert cache_dir(env) == expected


def test_a_missing_binding_is_one_sentence_that_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['pynvml'] = None\n"
            "from gpuwatch.sources.nvml.binding import import_pynvml\n"
            "from gpuwatch.sources.base import SourceUnavailable\n"
            "try:\n    import_pynvml()\nexcept SourceUnavailable as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "the NVML binding is not installed (pip install nvidia-ml-py)", done.stderr
