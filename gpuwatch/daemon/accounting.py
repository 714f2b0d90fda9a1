"""The daemon's GPU-hour accounting (:mod:`gpuwatch.efficiency`), built and served by the daemon.

:func:`build` (from :func:`~gpuwatch.daemon.assembly.assemble`) opens the roll-up store in the daemon's
state directory, subscribes the accounting to the sampler and adds the two counter families to /metrics;
:func:`serve` (once the app exists) serves ``GET /api/v1/efficiency`` and ties the worker thread to the
app's start and cleanup hooks (cleanup runs after the sampler stopped, so every Snapshot is accounted). The
arrow goes one way: the daemon imports the accounting, never the reverse.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
from pathlib import Path

from gpuwatch.config import Config
from gpuwatch.daemon.parts import StartError, state_dir
from gpuwatch.daemon.server import App, Request, Response, json_response
from gpuwatch.efficiency.metrics import TotalsCollector
from gpuwatch.efficiency.service import Accounting
from gpuwatch.efficiency.store import FILE, Store
from gpuwatch.exporter import Exporter
from gpuwatch.notify.outbox import move_aside
from gpuwatch.sampler.sampler import Sampler

log = logging.getLogger(__name__)
DEFAULT_WINDOW_S = 86400.0


def build(config: Config, sampler: Sampler, exporter: Exporter) -> Accounting | None:
    """The accounting, fed by ``sampler`` and counted on ``exporter`` (None when ``[efficiency] enabled =
    false``). It judges each block with the doctor on the block's own window, as ``gpuwatch report
    --replay`` does, so a replayed recording gives the same lost seconds by cause in both."""
    if not config.efficiency.enabled:
        return None
    store = open_store(state_dir(config) / FILE, config.efficiency.retention)
    accounting = Accounting(store, config.sampler.interval, config.daemon.max_process_series)
    sampler.subscribe(accounting.offer)
    exporter.registry.register(TotalsCollector(accounting.totals))
    return accounting


def serve(app: App, accounting: Accounting | None) -> None:
    """``GET /api/v1/efficiency`` on ``app``, and the worker thread started and stopped with it."""
    if accounting is None:
        return
    app.get("/api/v1/efficiency", lambda request: efficiency(request, accounting))

    async def start() -> None:
        accounting.start()

    async def stop() -> None:  # drains the queue and commits: off the event loop
        await asyncio.get_running_loop().run_in_executor(None, accounting.stop)

    app.on_startup.append(start)
    app.on_cleanup.append(stop)


def open_store(path: Path, retention_s: float) -> Store:
    """The roll-up store; a damaged file (not a database) is moved aside, loudly, and a fresh one started:
    losing past roll-ups must not stop the daemon. A directory it cannot write to stops it, with the fix."""
    try:
        try:
            return Store(path, retention_s)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise
            aside = move_aside(path)
            log.error("the efficiency roll-ups %s are damaged (%s): moved them to %s and started afresh",
                      path, exc, aside.name)
            return Store(path, retention_s)
    except (OSError, sqlite3.Error) as exc:
        raise StartError(f"cannot open the efficiency roll-ups {path}: {exc} (set state_dir in [daemon] to a "
                         f"writable directory, or [efficiency] enabled = false)") from None


def efficiency(request: Request, accounting: Accounting) -> Response:
    """The hourly roll-ups of the last ``?window=S`` seconds (default a day) before the newest accounted
    snapshot, with the doctor's fix text per cause (on the connection's thread: the store has its lock)."""
    try:
        window = float(request.query.get("window", DEFAULT_WINDOW_S))
    except ValueError:
        window = -1.0
    if not math.isfinite(window) or window <= 0:
        return json_response({"error": "window must be a positive number of seconds"}, 400)
    until = accounting.last_time
    if until is None:
        return json_response({"error": "nothing accounted yet"}, 503)
    rollup = accounting.rollup(until - window)
    return json_response({"since": until - window, "until": until, "origin": accounting.origin, **rollup.to_dict()})
