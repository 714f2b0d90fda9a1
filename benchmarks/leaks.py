"""Leaks: the daemon's RSS after 100 000 replayed ticks against its RSS after 1 000.

The daemon replays a 1 000-tick recording as fast as it can (``--speed 0 --loop``) in which a process
ends and a new one starts every 10 ticks and alerts pend, fire and resolve. Its tick count is read from
``/api/v1/snapshot`` (``seq``); RSS is read from /proc. By tick 1 000 every ring buffer (history,
stream backlog) is full, so growth after that is memory that is never given back.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

if __name__ == "__main__":  # run as a script: this checkout's benchmarks and gpuwatch
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import commands
from benchmarks.procs import Started, free_port, start, wait_http

BASE_TICKS = 1_000
TARGET_TICKS = 100_000
SETTLED_TICKS = 10_000


def _seq(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return int(json.loads(resp.read()).get("seq", 0))


class LeakRun:
    """A replaying daemon, polled from :meth:`poll_until` (in a thread beside other measurements)."""

    def __init__(self, recording: Path, logdir: Path) -> None:
        self.port = free_port()
        self.cmd = commands.daemon(self.port, "--replay", str(recording), "--speed", "0", "--loop")
        self.proc: Started = start("daemon-leak", self.cmd, logdir, env=commands.isolated_env("daemon-leak", logdir))
        self.url = f"http://127.0.0.1:{self.port}/api/v1/snapshot"
        self.curve: list[tuple[int, float, float]] = []  # (ticks, MiB, seconds since start)
        self.error: str | None = None
        self.health: Any = None
        self._t0 = time.monotonic()

    def _rss(self) -> float:
        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def _point(self) -> tuple[int, float]:
        seq, rss = _seq(self.url), self._rss()
        self.curve.append((seq, round(rss, 2), round(time.monotonic() - self._t0, 1)))
        return seq, rss

    def poll_until(self, target: int = TARGET_TICKS, timeout_s: float = 300.0, settled: int = SETTLED_TICKS) -> None:
        try:
            wait_http(self.url, 60, self.proc)
            seq = 0
            while seq < BASE_TICKS:
                time.sleep(0.02)
                seq = _seq(self.url)
            seq, _ = self._point()
            deadline = time.monotonic() + timeout_s
            step = max(1, target // 20)
            mark = min(seq + step, settled)
            while seq < target and time.monotonic() < deadline:
                time.sleep(0.25)
                seq = _seq(self.url)
                if seq >= mark or seq >= target:
                    self._point()
                    mark = seq + step
        except (OSError, RuntimeError, TimeoutError, ValueError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"[:1500]
        finally:
            self.health = self._health()
            self.proc.stop()

    def _health(self) -> Any:
        try:
            with urllib.request.urlopen(self.url.replace("/api/v1/snapshot", "/healthz"), timeout=5) as resp:
                return json.loads(resp.read())
        except (OSError, ValueError):
            return None

    def result(self, settled_ticks: int = SETTLED_TICKS) -> dict[str, Any]:
        out: dict[str, Any] = {"leak_command": " ".join(self.cmd[2:]), "leak_curve": self.curve,
                               "leak_daemon_health": self.health}
        if self.error:
            out["leak_error"] = self.error
        base = next(((s, r) for s, r, _ in self.curve if s >= BASE_TICKS), None)
        last = self.curve[-1] if self.curve else None
        if base is None or last is None:
            return out
        out.update(leak_rss_mib_1k=base[1], leak_ticks_base=base[0], leak_ticks=last[0],
                   leak_rss_mib_end=last[1], leak_seconds=last[2])
        settled = next(((s, r) for s, r, _ in self.curve if s >= settled_ticks), None)
        if settled is not None and last[0] > settled[0]:
            # Growth once warm (alert states, allocator arenas and caches have reached their size).
            out.update(leak_rss_mib_10k=settled[1], rss_growth_mib_10k_to_end=round(last[1] - settled[1], 2))
        if last[0] >= TARGET_TICKS:
            out["rss_growth_mib_100k"] = round(last[1] - base[1], 2)
        else:  # did not get there in time: report the growth over the ticks it did, labelled as such
            out["rss_growth_mib_partial"] = round(last[1] - base[1], 2)
        out["leak_ticks_per_s"] = round((last[0] - base[0]) / max(0.001, last[2] - self._t_base()), 1)
        return out

    def _t_base(self) -> float:
        return next((t for s, _, t in self.curve if s >= BASE_TICKS), 0.0)


def main() -> int:
    """On its own: ``python benchmarks/leaks.py --ticks 40000`` (the growth from ``--settled`` to the end)."""
    from benchmarks.recordings import make_leak_recording

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ticks", type=int, default=TARGET_TICKS, help=f"ticks to run to (default {TARGET_TICKS})")
    p.add_argument("--settled", type=int, default=SETTLED_TICKS, help="the tick growth is counted from")
    p.add_argument("--timeout", type=float, default=900.0, help="most seconds to reach --ticks")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuwatch-leak-") as tmp:
        recording = Path(tmp) / "leak.ndjson.gz"
        make_leak_recording(recording)
        run = LeakRun(recording, Path(tmp))
        run.poll_until(args.ticks, args.timeout, args.settled)
        print(json.dumps(run.result(args.settled), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
