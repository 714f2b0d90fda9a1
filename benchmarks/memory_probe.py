"""Where a running daemon's memory is, read from inside it: installed in the daemon's own process (before
``gpuwatch.cli.main``) by :mod:`benchmarks.daemon_memory`; on SIGUSR2 it writes one JSON report.

The report: RSS split by mapping (heap, anonymous, files), glibc's arenas (``malloc_info``: what each holds
from the system and how much of it is free), CPython's small-object allocator (``sys._debugmallocstats``),
the threads, the live objects by type, what each of the daemon's long-lived parts retains (a walk of the
objects it reaches, each object counted once, in the order of :data:`PARTS`), and, under
``PYTHONTRACEMALLOC``, the traced bytes by allocating module and line.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import re
import signal
import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import Any

#: The daemon's long-lived parts, by class name; each one's retained bytes exclude what an earlier one holds.
PARTS = ("History", "StreamHub", "AlertEngine", "Notifier", "Outbox", "Deliverer", "SharedDiagnosis",
         "Accounting", "Rollouts", "SnapshotCollector", "Exporter", "Pipeline", "NvmlSource", "HostSource",
         "StackSource", "LiveCollector", "ReplayProducer", "Sampler", "Daemon")
_SKIP = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CodeType,
         types.FrameType, threading.Thread)


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "Threads", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def _smaps() -> dict[str, float]:
    """Resident KiB by mapping: [heap], [stack], anonymous by size class, files by name."""
    sizes: collections.Counter[str] = collections.Counter()
    name, size = "[anon]", 0
    with open("/proc/self/smaps") as fh:
        for line in fh:
            parts = line.split()
            if not parts:
                continue
            if not parts[0].endswith(":") and "-" in parts[0]:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                size = (hi - lo) // 1024
                name = parts[5].rsplit("/", 1)[-1] if len(parts) > 5 else f"[anon {_anon_class(size)}]"
            elif parts[0] == "Rss:":
                sizes[name] += int(parts[1])
    return {k: round(v / 1024, 2) for k, v in sizes.most_common() if v}


def _anon_class(kib: int) -> str:
    if kib == 8192:
        return "8 MiB (a thread stack)"
    if kib >= 60 * 1024:
        return ">= 60 MiB (a glibc arena heap)"
    return "other"


def _malloc_info() -> dict[str, Any]:
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    with tempfile.NamedTemporaryFile(suffix=".xml") as tmp:
        fp = libc.fopen(tmp.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        xml = Path(tmp.name).read_text()
    heaps = []
    for m in re.finditer(r'<heap nr="(\d+)">(.*?)</heap>', xml, re.S):
        body = m.group(2)
        system = re.search(r'<system type="current" size="(\d+)"', body)
        free = sum(int(x) for x in re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"', body))
        heaps.append({"arena": int(m.group(1)), "system_kib": int(system.group(1)) // 1024 if system else 0,
                      "free_kib": free // 1024})
    tail = xml.rsplit("</heap>", 1)[-1]
    mmap = re.search(r'<total type="mmap" count="(\d+)" size="(\d+)"', tail)
    return {"arenas": len(heaps), "heaps": heaps,
            "system_kib": sum(h["system_kib"] for h in heaps), "free_kib": sum(h["free_kib"] for h in heaps),
            "mmapped_chunks": int(mmap.group(1)) if mmap else 0,
            "mmapped_kib": int(mmap.group(2)) // 1024 if mmap else 0}


def _obmalloc() -> dict[str, Any]:
    """CPython's arenas from ``sys._debugmallocstats`` (it writes to fd 2: caught in a file)."""
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode(errors="replace")
    out: dict[str, Any] = {}
    for key, pattern in (("arenas", r"# arenas allocated current\s*=\s*([\d,]+)"),
                         ("allocated_blocks_bytes", r"# bytes in allocated blocks\s*=\s*([\d,]+)"),
                         ("free_blocks_bytes", r"# bytes in available blocks\s*=\s*([\d,]+)"),
                         ("unused_pools_bytes", r"unused pools \* \d+ bytes\s*=\s*([\d,]+)"),
                         ("total_bytes", r"Total\s*=\s*([\d,]+)")):
        m = re.search(pattern, text)
        if m:
            out[key] = int(m.group(1).replace(",", ""))
    return out


def _sqlite() -> dict[str, float]:
    """SQLite's own heap (every connection's page cache, schema and statements), from the loaded library."""
    if "_sqlite3" not in sys.modules:
        return {}
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
    except OSError:
        return {}
    lib.sqlite3_memory_used.restype = lib.sqlite3_memory_highwater.restype = ctypes.c_int64
    return {"memory_used_kib": round(lib.sqlite3_memory_used() / 1024, 1),
            "highwater_kib": round(lib.sqlite3_memory_highwater(0) / 1024, 1)}


def _retained(roots: list[object], seen: set[int]) -> tuple[int, int]:
    """(bytes, objects) reachable from ``roots`` and not in ``seen`` (which grows), modules, classes,
    functions and threads not followed."""
    total = count = 0
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SKIP):
            continue
        seen.add(id(obj))
        try:
            total += sys.getsizeof(obj)
        except TypeError:
            continue
        count += 1
        stack.extend(gc.get_referents(obj))
    return total, count


def _parts() -> dict[str, Any]:
    objs = gc.get_objects()
    by_name: dict[str, list[object]] = collections.defaultdict(list)
    wanted = set(PARTS)
    for o in objs:
        name = type(o).__name__
        if name in wanted:
            by_name[name].append(o)
    seen: set[int] = {id(objs)}
    out = {}
    for name in PARTS:
        if by_name.get(name):
            size, count = _retained(by_name[name], seen)
            out[name] = {"kib": round(size / 1024, 1), "objects": count, "instances": len(by_name[name])}
    types_ = collections.Counter(type(o).__name__ for o in objs)
    history = by_name.get("History")
    extra = {"history_len": len(history[0]) if history else None}
    del objs
    return {"parts": out, "gc_objects_by_type": dict(types_.most_common(25)), "gc_tracked": sum(types_.values()),
            **extra}


_previous: list[Any] = []


_seen_before: list[set[int]] = []


def holders(sample: int = 60, depth: int = 5) -> dict[str, Any]:
    """What holds the containers (tuples, lists, dicts) that are alive now, were not at the last report and
    are not the History's: for a sample of them, the chain of referrer types up to ``depth`` levels."""
    objs = gc.get_objects()
    history = [o for o in objs if type(o).__name__ == "History"]
    in_history: set[int] = set()
    _retained(history, in_history)
    kinds = (tuple, list, dict)
    alive = [o for o in objs if type(o) in kinds]
    before = _seen_before[0] if _seen_before else None
    _seen_before[:] = [{id(o) for o in alive}]
    if before is None:
        return {"containers": len(alive)}
    new = [o for o in alive if id(o) not in before and id(o) not in in_history]
    chains: collections.Counter[str] = collections.Counter()
    picked = new[:: max(1, len(new) // sample)]
    skip = {id(objs), id(alive), id(new), id(history), id(picked)}
    for obj in picked:
        chain, cur = [type(obj).__name__ + (f"[{len(obj)}]" if isinstance(obj, tuple) else "")], obj
        for _ in range(depth):
            refs = gc.get_referrers(cur)
            skip.add(id(refs))
            refs = [r for r in refs if id(r) not in skip and r is not chain and type(r).__name__ != "list_iterator"]
            skip.add(id(refs))
            if not refs:
                break
            cur = refs[0]
            if isinstance(cur, types.FrameType):
                chain.append(f"frame {cur.f_code.co_name} ({cur.f_code.co_filename.rsplit('/', 1)[-1]})")
                break
            chain.append(type(cur).__name__)
        chains[" <- ".join(chain)] += 1
    return {"containers": len(alive), "new_not_history": len(new), **dict(chains.most_common(20))}


def _tracemalloc() -> dict[str, Any]:
    import tracemalloc

    if not tracemalloc.is_tracing():
        return {}
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    grown = []
    if _previous:
        grown = [{"where": f"{d.traceback[0].filename.rsplit('/', 2)[-1]}:{d.traceback[0].lineno}",
                  "kib": round(d.size_diff / 1024, 1), "blocks": d.count_diff}
                 for d in snap.compare_to(_previous[-1], "lineno")[:30]]
    _previous[:] = [snap]
    by_file: collections.Counter[str] = collections.Counter()
    for stat in snap.statistics("filename"):
        path = stat.traceback[0].filename
        key = path.rsplit("/gpuwatch/", 1)[1] if "/gpuwatch/" in path else (
            path.rsplit("site-packages/", 1)[1].split("/")[0] if "site-packages/" in path else
            "stdlib " + path.rsplit("/", 1)[-1] if path.startswith(sys.base_prefix) else path.rsplit("/", 2)[-1])
        by_file[key] += stat.size
    lines = [{"where": f"{s.traceback[0].filename.rsplit('/', 2)[-1]}:{s.traceback[0].lineno}",
              "kib": round(s.size / 1024, 1), "blocks": s.count} for s in snap.statistics("lineno")[:40]]
    return {"traced_kib": round(sum(by_file.values()) / 1024, 1),
            "by_file_kib": {k: round(v / 1024, 1) for k, v in by_file.most_common(40)}, "top_lines": lines,
            "grown_since_last_report": grown}


def _trim() -> dict[str, float]:
    """RSS (MiB) after the report, after a full collection, and after glibc's ``malloc_trim(0)`` (what the
    arenas held free that the kernel could take back)."""
    out = {"after_report": _status()["VmRSS"] / 1024}
    gc.collect()
    out["after_gc_collect"] = _status()["VmRSS"] / 1024
    ctypes.CDLL(None).malloc_trim(0)
    out["after_malloc_trim"] = _status()["VmRSS"] / 1024
    return {k: round(v, 2) for k, v in out.items()}


def light_report() -> dict[str, Any]:
    """What can be read without allocating much (a report that walks every object leaves its own garbage in
    CPython's pools, which a series of reports then measures): RSS, the arenas, live objects by type."""
    types_ = collections.Counter(type(o).__name__ for o in gc.get_objects())
    return {"status_kib": _status(), "obmalloc": _obmalloc(), "malloc": _malloc_info(), "sqlite": _sqlite(),
            "gc_tracked": sum(types_.values()), "gc_objects_by_type": dict(types_.most_common(40))}


def report() -> dict[str, Any]:
    if os.environ.get("MEMPROBE_LIGHT"):
        return light_report()
    return {"status_kib": _status(), "smaps_mib": _smaps(), "malloc": _malloc_info(), "obmalloc": _obmalloc(),
            "sqlite": _sqlite(),
            "threads": sorted(t.name for t in threading.enumerate()), **_parts(), "tracemalloc": _tracemalloc(),
            "modules": list(sys.modules), "holders": holders(), "trim_mib": _trim()}


def install(path_prefix: str) -> None:
    """SIGUSR2 writes ``<path_prefix>-<n>.json`` (n counts from 1)."""
    counter = [0]

    def handler(signum: int, frame: object) -> None:
        counter[0] += 1
        data = report()
        with open(f"{path_prefix}-{counter[0]}.json", "w") as fh:
            json.dump(data, fh, indent=1)

    signal.signal(signal.SIGUSR2, handler)
