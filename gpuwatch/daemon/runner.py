"""The daemon's life: bind, sample, tell systemd, serve, reload on SIGHUP, stop cleanly on SIGTERM.

Order at start: build every part once, in :func:`~gpuwatch.daemon.assembly.assemble` (a bad rule file or
secret stops us before anything runs), then in :meth:`Daemon.run` bind the socket, start the sampler, wait
(briefly) for the first snapshot, then READY=1. A reload builds the new rules, receivers and token first
and swaps them in through the methods their owners expose (:meth:`Parts.reload`), or keeps the running
ones. At stop: STOPPING=1,
stop sampling and serving (an attempt in flight to a receiver is abandoned, not waited for), then one last
delivery attempt for every queued notification, bounded to FLUSH_TIMEOUT_S whatever the receivers do;
whatever is still undelivered stays in the outbox and goes out after the next start, with the same id.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable
from typing import Any

from gpuwatch.alerts import RuleSet
from gpuwatch.config import Config, ConfigError, check_listen
from gpuwatch.config.fields import is_loopback
from gpuwatch.daemon import accounting, digest, parts, rollouts
from gpuwatch.daemon.app import Services, build_app
from gpuwatch.daemon.assembly import assemble
from gpuwatch.daemon.connections import ConnectionGuard, connection_cap, quiet_accept_errors, raise_fd_limit
from gpuwatch.daemon.reloadable import needs_restart
from gpuwatch.daemon.sd_notify import SystemdNotifier, watchdog_may_ping
from gpuwatch.daemon.server import Server, bind
from gpuwatch.notify import Target
from gpuwatch.sampler.sampler import Sampler

log = logging.getLogger(__name__)

FIRST_SNAPSHOT_WAIT_S = 15.0
FLUSH_TIMEOUT_S = 5.0
#: At stop, how long responses in flight may take to finish before their connections are cut.
GRACE_S = 5.0


class Daemon:
    """Every part built once from ``config`` around ``sampler`` (opened by ``runtime.build.open_sampler``): the
    alert engine, the notifier and its outbox, the exporter and the HTTP app; :meth:`run` serves until stopped."""

    def __init__(self, config: Config, sampler: Sampler, description: str, is_recording: bool,
                 reload_config: Callable[[], Config], notifier: SystemdNotifier | None = None) -> None:
        self.config = config
        self.description = description
        self.is_recording = is_recording
        self.reload_config = reload_config
        self.sd = notifier or SystemdNotifier()
        self.token = parts.read_token(config)
        try:
            self.host, self.port = check_listen(config, self.token)
        except ConfigError as exc:
            raise parts.StartError(str(exc)) from None
        self.parts = assemble(config, sampler, self.port)
        p = self.parts
        self.sampler, self.engine, self.outbox, self.hub = p.sampler, p.engine, p.outbox, p.hub
        self.notify, self.deliverer, self.pipeline, self.diagnosis = p.notify, p.deliverer, p.pipeline, p.diagnosis
        self.exporter = p.exporter
        self._warn_if_no_rules(config)
        reads = config.daemon.token_for_reads
        self.services = Services(p.pipeline, p.exporter, lambda: list(p.sampler.history), p.diagnosis,
                                 self._health, self._reload_from_thread, self.token,
                                 token_for_reads=not is_loopback(self.host) if reads is None else reads,
                                 max_stream_clients=config.daemon.max_stream_clients)
        #: The connection cap; :meth:`run` lowers it to what the open-file limit allows.
        self.guard = ConnectionGuard(config.daemon.max_connections, config.daemon.request_timeout)
        self.app = build_app(self.services)
        self.efficiency = p.efficiency
        accounting.serve(self.app, self.efficiency)
        rollouts.serve(self.app, p.rollouts, p.deliverer.wake.set)
        self.digest = digest.serve(self.app, config, p.outbox, self.efficiency, lambda: p.notify.receivers,
                                   p.deliverer.wake.set, p.rollouts.store.rollouts if p.rollouts else None)
        self.stop_event: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.bound_port: int | None = None
        self._reload_lock = asyncio.Lock()

    def _warn_if_no_rules(self, config: Config) -> None:
        warning = parts.no_rules_warning(self.engine.rules, config)
        if warning:
            log.warning("%s", warning)

    def _health(self) -> tuple[bool, dict[str, Any]]:
        p = self.pipeline
        finished = self.sampler.finished.is_set()
        age = time.monotonic() - p.last_received if p.latest is not None else None
        failed = self.sampler.error
        stalled = failed is not None or age is None or (
            not finished and age > max(10.0, 5 * self.sampler.interval))
        notifier, delivery = self.notify.health, self.deliverer.health_report()
        info = {"source": self.description, "ticks": p.received, "evaluated": p.evaluated,
                "last_snapshot_age_s": None if age is None else round(age, 3),
                "sampler": "failed" if failed else "finished" if finished else "running", "alerts": len(p.alerts),
                "origin": p.latest.origin if p.latest is not None else None, "rules": len(self.engine.rules),
                "notifier": self.notify.health_report(), "delivery": delivery, "stalled": stalled,
                **({"sampler_error": failed} if failed else {}),
                **({"efficiency_dropped": self.efficiency.dropped, "efficiency_backlog": self.efficiency.backlog,
                    "efficiency_unsaved": self.efficiency.unsaved,
                    "efficiency_unsaved_dropped": self.efficiency.unsaved_dropped}
                   if self.efficiency is not None else {}),
                **({"rollouts_pending": self.parts.rollouts.detector.pending,
                    "rollouts_dropped": self.parts.rollouts.dropped} if self.parts.rollouts is not None else {})}
        failing = self._failing()
        if failing:
            info["failing"] = failing
        if not info["rules"]:
            info["warning"] = "no alert rules loaded: no alert can fire"
        return not stalled and not failing and notifier.healthy and delivery["ok"], info

    def _failing(self) -> dict[str, str]:
        """What the daemon does on every snapshot or scrape and last failed at: the alert evaluation, the
        /metrics render, the roll-up writes (each cleared by its next success)."""
        failing = {}
        if self.pipeline.evaluation_error:
            failing["alert_evaluation"] = self.pipeline.evaluation_error
        if self.services.render_error:
            failing["metrics_render"] = self.services.render_error
        if self.efficiency is not None and self.efficiency.unsaved:
            failing["efficiency_rollups"] = (f"{self.efficiency.unsaved} block(s) not written: "
                                             f"{self.efficiency.last_error}")
        return failing

    async def reload(self) -> tuple[bool, str]:
        """Re-read config and rules; on any error keep the running ones and say why."""
        self.sd.reloading()

        def parse() -> tuple[Config, RuleSet, dict[str, Target], str | None]:
            new = self.reload_config()
            return new, parts.build_rules(new), parts.build_targets(new), parts.read_token(new)

        try:  # off the event loop: a big rule file must not stall /healthz and /metrics
            async with self._reload_lock:  # two SIGHUPs in a row: one parse at a time, in order
                new, rules, targets, token = await asyncio.get_running_loop().run_in_executor(None, parse)
            restart = needs_restart(self.config, new)
            if restart:
                takes = "that takes" if len(restart) == 1 else "those take"
                raise parts.StartError(f"{', '.join(restart)} changed: {takes} a restart of the daemon (nothing "
                                       f"was reloaded)")
            if token is None and not is_loopback(self.host):
                raise parts.StartError(f"the daemon serves on {self.host}, which needs a token: keep token_file")
        except (ConfigError, parts.StartError) as exc:
            log.error("reload failed, keeping the running config and rules: %s", exc)
            self.sd.ready(f"reload failed: {exc}")
            return False, str(exc)

        await self.parts.reload(new, rules, targets)
        reads = new.daemon.token_for_reads
        self.services.set_access(token, not is_loopback(self.host) if reads is None else reads,
                                 new.daemon.max_stream_clients)
        self.config = new
        self._warn_if_no_rules(new)
        message = f"reloaded: {len(rules)} rule(s), {len(targets)} receiver(s)"
        log.info("%s", message)
        self.sd.ready(message)
        return True, message

    def _reload_from_thread(self) -> tuple[bool, str]:
        """POST /api/v1/reload, from a connection's thread: the reload runs on the event loop, as SIGHUP's."""
        if self.loop is None:
            return False, "the daemon is not running"
        return asyncio.run_coroutine_threadsafe(self.reload(), self.loop).result()

    async def _watchdog(self, stop: asyncio.Event) -> None:
        interval = self.sd.watchdog_interval()
        if interval is None:
            return
        started, pinging = time.monotonic(), True
        while not stop.is_set():
            ok = self._watchdog_ok(time.monotonic() - started)
            if ok:
                self.sd.watchdog()
            if ok != pinging:  # said once per change, not every interval
                log.log(logging.WARNING if ok else logging.ERROR, "%s", "healthy again: pinging the systemd "
                        "watchdog" if ok else "the daemon is unhealthy (see /healthz): not pinging the watchdog")
                pinging = ok
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except asyncio.TimeoutError:
                pass

    def _watchdog_ok(self, since_start_s: float) -> bool:
        """Healthy apart from receivers (a restart does not mend a receiver), or still starting."""
        _, info = self._health()
        healthy = (not info["stalled"] and not info.get("failing") and info["notifier"]["ok"]
                   and info["delivery"]["outbox"]["ok"])
        return watchdog_may_ping(healthy, since_start_s, self.pipeline.latest is not None,
                                 self.sampler.error is not None)

    def request_stop(self) -> None:
        """Stop from any thread (what SIGTERM does)."""
        if self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)

    def _install_signals(self, loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
        """SIGTERM/SIGINT stop, SIGHUP reloads. Only the main thread may own signals (tests run the
        daemon on another thread and stop it through :attr:`stop_event`)."""
        for sig, handler in ((signal.SIGTERM, stop.set), (signal.SIGINT, stop.set),
                             (signal.SIGHUP, lambda: loop.create_task(self.reload()))):
            try:
                loop.add_signal_handler(sig, handler)
            except (RuntimeError, ValueError):
                return

    async def run(self) -> int:
        loop = self.loop = asyncio.get_running_loop()
        stop = self.stop_event = asyncio.Event()
        self.pipeline.start(loop)
        quiet_accept_errors(loop)
        self.guard.limit = connection_cap(self.config.daemon.max_connections, raise_fd_limit())
        try:
            server = bind(self.host, self.port, self.app, self.guard, self.config.daemon.request_timeout)
        except OSError as exc:
            raise parts.StartError(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc} (pick another "
                                   f"port with --listen HOST:PORT)") from None
        for hook in self.app.on_startup:
            await hook()
        server.start()
        self.bound_port = server.port
        self._install_signals(loop, stop)
        self.sampler.start()
        self.diagnosis.start()
        tasks = [loop.create_task(self.deliverer.run(stop)), loop.create_task(self._watchdog(stop))]
        first = [asyncio.ensure_future(self.pipeline.first_snapshot.wait()), asyncio.ensure_future(stop.wait())]
        await asyncio.wait(first, timeout=FIRST_SNAPSHOT_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        for waiter in first:
            waiter.cancel()
        if not self.pipeline.first_snapshot.is_set() and not stop.is_set():
            log.warning("no snapshot within %.0f s; reporting ready anyway", FIRST_SNAPSHOT_WAIT_S)
        log.info("gpuwatch daemon serving on http://%s:%d (%s)", self.host, self.bound_port, self.description)
        self.sd.ready(f"serving on {self.host}:{self.bound_port}, {self.description}")
        await stop.wait()
        self.sd.stopping()
        await self._shutdown(server, tasks)
        return 0

    async def _shutdown(self, server: Server, tasks: list[asyncio.Task[None]]) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.sampler.stop)
        await loop.run_in_executor(None, self.diagnosis.stop)
        await loop.run_in_executor(None, self.pipeline.close)
        self.hub.close()
        await asyncio.gather(*tasks, return_exceptions=True)
        await loop.run_in_executor(None, server.close, GRACE_S)  # in-flight responses finish; streams ended
        for hook in self.app.on_cleanup:
            await hook()
        left = await self.deliverer.flush(FLUSH_TIMEOUT_S)
        if left:
            log.warning("%d notification(s) still undelivered; they go out after the next start", left)
        self.outbox.close()
