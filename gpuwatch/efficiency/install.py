"""How the daemon gets its accounting: one call, :func:`install`, from the daemon's constructor.

It opens the roll-up store in the daemon's state directory, subscribes the accounting to the sampler,
adds the two counter families to /metrics, serves ``GET /api/v1/efficiency`` and ties the worker thread to
the app's start and cleanup (cleanup runs after the sampler stopped, so every Snapshot is accounted).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from gpuwatch.config import Config
from gpuwatch.daemon.parts import StartError, state_dir
from gpuwatch.doctor import diagnose
from gpuwatch.efficiency.ledger import Doctor
from gpuwatch.efficiency.metrics import TotalsCollector
from gpuwatch.efficiency.service import Accounting
from gpuwatch.efficiency.store import FILE, Store
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.notify.outbox import move_aside

log = logging.getLogger(__name__)
ACCOUNTING = web.AppKey("efficiency", Accounting)
DEFAULT_WINDOW_S = 86400.0


class _Sampler(Protocol):
    def subscribe(self, fn: Callable[[Snapshot], None]) -> Callable[[], None]: ...


class _Registry(Protocol):
    def register(self, collector: Any) -> None: ...


class _Exporter(Protocol):
    @property
    def registry(self) -> _Registry: ...


class DaemonParts(Protocol):
    """What :func:`install` needs of the daemon."""

    @property
    def config(self) -> Config: ...
    @property
    def sampler(self) -> _Sampler: ...
    @property
    def exporter(self) -> _Exporter: ...
    @property
    def app(self) -> web.Application: ...


def install(daemon: DaemonParts) -> Accounting | None:
    """Wire the accounting into ``daemon`` (nothing when ``[efficiency] enabled = false``)."""
    config = daemon.config
    if not config.efficiency.enabled:
        return None
    store = open_store(state_dir(config) / FILE, config.efficiency.retention)
    shared = getattr(daemon, "diagnosis", None)
    accounting = Accounting(store, config.sampler.interval, config.daemon.max_process_series,
                            doctor=diagnose if shared is None else shared_doctor(shared))
    daemon.sampler.subscribe(accounting.offer)
    daemon.exporter.registry.register(TotalsCollector(accounting.totals))
    app = daemon.app
    app[ACCOUNTING] = accounting
    app.router.add_get("/api/v1/efficiency", efficiency)

    async def start(_: web.Application) -> None:
        accounting.start()

    async def stop(_: web.Application) -> None:  # drains the queue and commits: off the event loop
        await asyncio.get_running_loop().run_in_executor(None, accounting.stop)

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return accounting


class _Shared(Protocol):
    history: Callable[[], Sequence[Snapshot]]

    def current(self) -> Any: ...


def shared_doctor(shared: _Shared) -> Doctor:
    """The accounting's doctor in a live daemon: the shared live-doctor evaluation (the one /metrics and the
    API serve) when it judged the window that ends where the accounting's block does, which it does while
    the accounting keeps up with the sampler; else (a replay faster than real time) a diagnosis of the
    block's own window, so a block is never judged on a later window than its own."""
    def doctor(window: Sequence[Snapshot]) -> list[Finding]:
        newest = shared.history()
        if window and newest and newest[-1].time == window[-1].time:  # else the shared one judges a later window
            evaluation = shared.current()
            if evaluation.findings is not None and evaluation.end == window[-1].time:
                return list(evaluation.findings)
        return diagnose(window)

    return doctor


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


async def efficiency(request: web.Request) -> web.Response:
    """The hourly roll-ups of the last ``?window=S`` seconds (default a day) before the newest accounted
    snapshot, with the doctor's fix text per cause."""
    accounting = request.app[ACCOUNTING]
    try:
        window = float(request.query.get("window", DEFAULT_WINDOW_S))
    except ValueError:
        window = -1.0
    if not math.isfinite(window) or window <= 0:
        return web.json_response({"error": "window must be a positive number of seconds"}, status=400)
    until = accounting.last_time
    if until is None:
        return web.json_response({"error": "nothing accounted yet"}, status=503)
    rollup = await asyncio.get_running_loop().run_in_executor(None, accounting.rollup, until - window)
    body = {"since": until - window, "until": until, "origin": accounting.origin, **rollup.to_dict()}
    return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), content_type="application/json")
