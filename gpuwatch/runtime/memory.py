"""The daemon's and the dashboard's memory kept near what they use: glibc's allocator told, before any thread
starts, to share its arenas and to map large blocks apart, and asked now and then to give back the pages it
holds free.

Why: every thread that allocates gets a glibc arena of its own (up to 8 per core), and what a thread frees
stays in its arena; a freed block of 128 KiB or more raises glibc's mmap threshold to its size, so later
blocks that large come from an arena and stay there once freed. The daemon has a dozen threads (the NVML
and host sources, the sampler, the alert worker, the doctor, the accounting, one per HTTP connection): a
running daemon had 13 arenas holding 13 MiB from the system, 5.7 MiB of it free, and a burst of large
blocks (a big response, py-spy's output) stayed resident after it was freed. A fixed threshold sends large
blocks back to the kernel when freed; ``malloc_trim`` hands back the whole free pages inside the arenas.

Start-up leaves garbage too: a module imported without a ``.pyc`` (an install that did not byte-compile, or
``PYTHONDONTWRITEBYTECODE``) is compiled in the process, and the compiler's free blocks stayed resident: the
dashboard started that way held 62 MiB where it holds 50 MiB after its first release (a development machine).

Elsewhere than glibc (musl, macOS) each call does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging

log = logging.getLogger(__name__)

#: mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
#: Arenas the threads share: one would make allocating threads queue on its lock; most of the daemon's
#: allocations are Python's (its own pools, under the GIL), so two leave little to wait for.
ARENAS = 2
#: Blocks this large or larger are mapped apart and unmapped when freed (glibc's default start, held fixed).
MMAP_THRESHOLD = 128 * 1024
#: Free memory at the top of an arena past this goes back at once (glibc's default start, held fixed).
TRIM_THRESHOLD = 128 * 1024


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt  # noqa: B018 - glibc has both; musl has mallopt but not malloc_trim
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def tune_allocator() -> bool:
    """Share ``ARENAS`` arenas among threads and hold the mmap and trim thresholds fixed. Call it before
    the first thread starts: a thread already running keeps the arena it has. False where not glibc."""
    if _LIBC is None:
        return False
    done = all(_LIBC.mallopt(param, value) == 1 for param, value in (
        (M_ARENA_MAX, ARENAS), (M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD)))
    if not done:
        log.debug("mallopt refused a setting; the allocator keeps its defaults")
    return done


def release() -> None:
    """Collect garbage cycles, then hand the allocator's free pages back to the kernel."""
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


#: Seconds after start when the objects alive then (modules, classes, the configuration, the sources' tables:
#: nearly all the daemon ever holds) are collected once and then left out of the garbage collector's care: its
#: full collections walked them all (tens of thousands), which made each release and each automatic full
#: collection cost the daemon tens of milliseconds. The dashboard runs the same :class:`Releaser` on its loop.
FREEZE_AFTER_S = 5.0
#: Seconds after start of the first release (start-up's garbage gone, the first windows judged), then between.
FIRST_RELEASE_S = 20.0
RELEASE_EVERY_S = 300.0


def freeze() -> None:
    """Collect start-up's garbage cycles, then move every object that survives to the permanent generation
    (``gc.freeze``): later collections walk only what was made since. An object frozen is still freed when its
    last reference goes; only a cycle among frozen objects would stay, and start-up's were collected first."""
    gc.collect()
    gc.freeze()


class Releaser:
    """On an event loop (the daemon's, idle between requests: no thread of its own): :func:`freeze` after
    ``freeze_s``, :func:`release` after ``first_s`` and then every ``every_s``."""

    def __init__(self, first_s: float = FIRST_RELEASE_S, every_s: float = RELEASE_EVERY_S,
                 freeze_s: float | None = FREEZE_AFTER_S) -> None:
        self.first_s, self.every_s, self.freeze_s = first_s, every_s, freeze_s
        self.releases = 0
        self.frozen = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._freezing: asyncio.TimerHandle | None = None
        self._handle: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        if self.freeze_s is not None:
            self._freezing = loop.call_later(self.freeze_s, self._freeze)
        self._handle = loop.call_later(self.first_s, self._tick)

    def _freeze(self) -> None:
        freeze()
        self.frozen = True

    def _tick(self) -> None:
        release()
        self.releases += 1
        assert self._loop is not None
        self._handle = self._loop.call_later(self.every_s, self._tick)

    def stop(self) -> None:
        for handle in (self._freezing, self._handle):
            if handle is not None:
                handle.cancel()
        self._freezing = self._handle = None
