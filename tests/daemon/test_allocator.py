"""The daemon's allocator: its threads share at most ``ARENAS`` glibc arenas, and the free pages inside them go
back to the kernel when it releases (``runtime/memory.py``). Real processes, RSS and arenas read from them."""

from __future__ import annotations

import asyncio
import gc
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from daemon.imports_probe import PATHS, _free_port, ask, wait_healthy
from gpuwatch.runtime import memory

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")

#: A daemon replaying the bundled recording whose SIGUSR1 writes how many malloc arenas it has.
HARNESS = """
import ctypes, re, signal, sys, tempfile
from gpuwatch.cli.main import main

def dump(*_):
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    with tempfile.NamedTemporaryFile() as tmp:
        fp = libc.fopen(tmp.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        arenas = len(re.findall('<heap nr=', open(tmp.name).read()))
    with open(sys.argv[1], "w") as fh:
        fh.write(str(arenas))

signal.signal(signal.SIGUSR1, dump)
sys.exit(main(sys.argv[2:]))
"""

#: In a fresh interpreter: fill the heap with blocks below the mmap threshold, free all but the last (so the
#: free memory is inside the heap, not at its top, where glibc gives it back by itself), then release.
FRAGMENTED = """
import sys
from gpuwatch.runtime import memory

def rss_mib():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20

memory.tune_allocator()
blocks = [bytearray(b"x" * 100_000) for _ in range(400)]  # 40 MB in blocks below the 128 KiB threshold
del blocks[:-1]
before = rss_mib()
memory.release()
print(before, rss_mib())
"""


def test_a_running_daemons_threads_share_at_most_the_arenas_it_allows() -> None:
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "arenas"
        env = {**os.environ, "HOME": tmp, "XDG_CONFIG_HOME": tmp, "XDG_STATE_HOME": tmp}
        env.pop("MALLOC_ARENA_MAX", None)
        proc = subprocess.Popen([sys.executable, "-c", HARNESS, str(out), "daemon", "--replay", "bundled", "--loop",
                                 "--listen", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        try:
            deadline = time.monotonic() + 60
            wait_healthy(port, proc, deadline)
            for path in PATHS:  # every connection is served on a thread of its own
                ask(port, "GET", path)
            proc.send_signal(signal.SIGUSR1)
            while not out.exists() or not out.read_text():
                assert time.monotonic() < deadline, "the daemon wrote no arena count"
                time.sleep(0.05)
            arenas = int(out.read_text())
        finally:
            proc.terminate()
            proc.wait(20)
    assert 1 <= arenas <= memory.ARENAS


def test_release_hands_back_the_free_memory_inside_the_heap() -> None:
    done = subprocess.run([sys.executable, "-c", FRAGMENTED], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(memory.__file__).parents[2])})
    assert done.returncode == 0, done.stderr
    before, after = (float(x) for x in done.stdout.split())
    assert before - after > 20, (before, after)  # of the ~38 MiB freed inside the heap


def test_the_releaser_freezes_then_releases_on_the_loop_until_it_is_stopped() -> None:
    releaser = memory.Releaser(first_s=0.01, every_s=0.02, freeze_s=0.005)

    async def go() -> tuple[int, int]:
        releaser.start(asyncio.get_running_loop())
        for _ in range(500):  # a release is a full collection: in a loaded test process one takes a while
            await asyncio.sleep(0.01)
            if releaser.releases >= 2:
                break
        releaser.stop()
        counted = releaser.releases
        await asyncio.sleep(0.1)
        return counted, releaser.releases

    try:
        counted, later = asyncio.run(go())
    finally:
        gc.unfreeze()  # this test process's objects back in the collector's care
    assert releaser.frozen
    assert counted >= 2  # the first, then again every_s
    assert later == counted  # none after stop


FREEZING = """
import gc, weakref
from gpuwatch.runtime import memory

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)

garbage_at_start = cycle()  # start-up's garbage: unreachable already, collected before freezing
kept = Node()
memory.freeze()
made_later = cycle()
print(garbage_at_start() is None, gc.get_freeze_count() > 0, made_later() is not None)
memory.release()
print(made_later() is None)
"""


def test_freezing_collects_start_up_garbage_then_leaves_survivors_out_of_later_collections() -> None:
    done = subprocess.run([sys.executable, "-c", FREEZING], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(memory.__file__).parents[2])})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "True"]
