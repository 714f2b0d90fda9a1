"""The daemon's rollouts (:mod:`gpuwatch.efficiency.rollouts`): detected beside the accounting, kept, sent, served.

:func:`build` (from :func:`~gpuwatch.daemon.assembly.assemble`) has :class:`Rollouts` ride the accounting
(:meth:`~gpuwatch.efficiency.worker.SnapshotWorker.carry`: the rollouts need the accounting on anyway); it
feeds every Snapshot to the detector as the sampler offers it, and each rollout it judges is written, on the
accounting's worker thread, to the ``rollouts`` table of the efficiency store (``efficiency.sqlite`` in the
state directory, so a restart keeps every verdict) and queued for the receivers through the outbox. :func:`serve` adds
``GET /api/v1/rollouts`` (``{"rollouts": [...]}``, ``?since=`` Unix seconds or a duration back such as
``7d``). A rollout still waiting for its new workload to settle when the daemon stops is dropped: its
before-window lived in memory only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Callable, Sequence

from gpuwatch.config import Config, ReceiverConfig
from gpuwatch.daemon.accounting import open_store
from gpuwatch.daemon.parts import state_dir
from gpuwatch.daemon.server import App, Request, Response, json_response
from gpuwatch.efficiency.rollouts import RolloutDetector, RolloutSettings
from gpuwatch.efficiency.service import Accounting
from gpuwatch.efficiency.store import FILE, Store
from gpuwatch.efficiency.worker import SnapshotWorker
from gpuwatch.model.durations import parse_duration
from gpuwatch.model.rollout import Rollout
from gpuwatch.model.snapshot import Snapshot
from gpuwatch.notify import Notifier, Outbox
from gpuwatch.notify.rollouts import enqueue_rollout

log = logging.getLogger(__name__)


class Rollouts:
    """A rider of the accounting (:class:`~gpuwatch.efficiency.worker.Rider`): each Snapshot, after the
    accounting, in order; a rollout found is kept and sent on the worker's thread, and the store is closed
    when the worker stops."""

    def __init__(self, store: Store, settings: RolloutSettings, outbox: Outbox,
                 receivers: Callable[[], Sequence[ReceiverConfig]], external_url: Callable[[], str],
                 worker: SnapshotWorker) -> None:
        self.store = store
        self.worker = worker
        self.detector = RolloutDetector(settings)
        self.outbox = outbox
        self.receivers = receivers
        self.external_url = external_url
        #: Called (on the event loop) after notifications were queued: wakes the deliverer.
        self.on_queued: Callable[[], None] = lambda: None
        self.loop: asyncio.AbstractEventLoop | None = None
        #: Rollouts judged by this daemon (the tests wait on it).
        self.judged = 0

    @property
    def dropped(self) -> int:
        """Jobs the worker was too stuck to do (roll-up blocks and rollouts not written)."""
        return self.worker.dropped

    def take(self, snap: Snapshot) -> None:
        try:
            found = self.detector.add(snap)
        except Exception:
            log.exception("the rollout detector failed on a snapshot; skipping it")
            return
        for rollout in found:
            self.worker.later(functools.partial(self._publish, rollout, snap.host.hostname))

    def finish(self) -> None:
        self.store.close()

    def _publish(self, rollout: Rollout, hostname: str) -> None:
        """Keep it, then queue its notifications; a failed write is logged and the notification still
        tried. One kept before (a replay run again) is not sent again."""
        self.judged += 1
        try:
            if not self.store.add_rollout(rollout):
                return
        except Exception as exc:
            log.error("keeping the rollout on GPU %s failed: %s", rollout.gpu_index, exc)
        log.info("rollout on GPU %s (%s): %s", rollout.gpu_index, rollout.owner, rollout.summary)
        try:
            queued = enqueue_rollout(self.outbox, self.receivers(), rollout, hostname, self.external_url())
            if queued and self.loop is not None:
                self.loop.call_soon_threadsafe(self.on_queued)
        except Exception as exc:
            log.error("queueing the rollout notification for GPU %s failed: %s", rollout.gpu_index, exc)

    def start_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Queued notifications wake the deliverer on ``loop`` (the accounting starts the thread)."""
        self.loop = loop


def settings(config: Config) -> RolloutSettings:
    e = config.efficiency
    return RolloutSettings(settle_s=e.rollout_settle, window_s=e.rollout_window,
                           min_window_s=min(RolloutSettings.min_window_s, e.rollout_window))


def build(config: Config, accounting: Accounting | None, outbox: Outbox, notify: Notifier) -> Rollouts | None:
    """The detector, riding ``accounting``'s worker (None when the accounting or ``[efficiency] rollouts`` is
    off)."""
    if accounting is None or not (config.efficiency.enabled and config.efficiency.rollouts):
        return None
    store = open_store(state_dir(config) / FILE, config.efficiency.retention)
    rollouts = Rollouts(store, settings(config), outbox, lambda: notify.receivers, lambda: notify.external_url,
                        accounting)
    accounting.carry(rollouts)
    return rollouts


def serve(app: App, worker: Rollouts | None, wake: Callable[[], None]) -> None:
    """``GET /api/v1/rollouts`` on ``app``; the accounting's worker, which it rides, starts and stops it."""
    if worker is None:
        return
    worker.on_queued = wake
    app.get("/api/v1/rollouts", lambda request: rollouts(request, worker))

    async def start() -> None:
        worker.start_on(asyncio.get_running_loop())

    app.on_startup.append(start)


def since_param(text: str | None, now: float) -> float | None:
    """``?since=``: Unix seconds, or a duration back from now (``7d``, ``90m``); None when it is neither."""
    if text is None:
        return -math.inf
    try:
        value = float(text)
    except ValueError:
        try:
            return now - parse_duration(text)
        except ValueError:
            return None
    return value if math.isfinite(value) else None


def rollouts(request: Request, worker: Rollouts) -> Response:
    """The rollouts judged since ``?since=`` (default: all kept), oldest first."""
    since = since_param(request.query.get("since"), time.time())
    if since is None:
        return json_response({"error": "since must be Unix seconds or a duration such as 7d"}, 400)
    return json_response({"rollouts": [r.to_dict() for r in worker.store.rollouts(since)]})
