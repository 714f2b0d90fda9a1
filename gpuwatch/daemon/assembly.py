"""The daemon's parts, built in one place around the Sampler the opener gave it, and swapped on reload
through the methods their owners expose.

:func:`assemble` makes the alert engine, the outbox, notifier and deliverer, the stream hub, the pipeline
between the sampler thread and the event loop, the one shared live-doctor evaluation, the exporter
with two registered collectors: the Snapshot's series and the daemon's own (:class:`DaemonSeries`), and
the GPU-hour accounting (:mod:`gpuwatch.daemon.accounting`) and the rollout detector
(:mod:`gpuwatch.daemon.rollouts`).
:meth:`Parts.reload` hands new rules, receivers and limits to their owners; nothing else writes another
object's attributes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import Metric

from gpuwatch.alerts import AlertEngine, RuleSet
from gpuwatch.config import Config
from gpuwatch.daemon import accounting, parts, rollouts
from gpuwatch.daemon.pipeline import Pipeline
from gpuwatch.daemon.rollouts import Rollouts
from gpuwatch.daemon.stream import StreamHub
from gpuwatch.diagnosis import SharedDiagnosis
from gpuwatch.efficiency.service import Accounting
from gpuwatch.exporter import Exporter, SnapshotCollector
from gpuwatch.notify import Deliverer, Notifier, Outbox, Target
from gpuwatch.sampler.sampler import Sampler


@dataclass
class Parts:
    sampler: Sampler
    engine: AlertEngine
    outbox: Outbox
    hub: StreamHub
    notify: Notifier
    deliverer: Deliverer
    pipeline: Pipeline
    diagnosis: SharedDiagnosis
    collector: SnapshotCollector
    exporter: Exporter
    #: The GPU-hour accounting (None: ``[efficiency] enabled = false``).
    efficiency: Accounting | None = None
    #: The rollout detector (None: ``[efficiency] enabled`` or ``rollouts`` false).
    rollouts: Rollouts | None = None

    def counters(self) -> parts.DaemonCounters:
        return parts.DaemonCounters(
            self.deliverer.failed_attempts, self.pipeline.skipped, self.hub.dropped, self.hub.clients,
            len(self.engine.rules),
            outbox_write_failures=self.notify.health.failures + self.deliverer.health.failures)

    async def reload(self, new: Config, rules: RuleSet, targets: dict[str, Target]) -> None:
        """New rules and receivers (on the alert worker, between two Snapshots), targets and limits."""

        def swap() -> None:
            self.engine.replace_rules(rules)
            self.notify.set_receivers(new.receivers)

        await self.pipeline.call(swap)
        self.deliverer.set_targets(targets)
        self.deliverer.set_config(new.notify)
        self.collector.set_process_limits(new.daemon.max_process_series, new.daemon.process_series_min_age)


class DaemonSeries:
    """The daemon's own series on /metrics (notification queue, failed attempts, drops, rules loaded),
    registered beside the Snapshot's collector."""

    def __init__(self, parts_: Parts) -> None:
        self.parts = parts_

    def collect(self) -> Iterator[Metric]:
        yield from parts.daemon_families(self.parts.outbox, self.parts.counters())


def assemble(config: Config, sampler: Sampler, port: int) -> Parts:
    """Every part of a daemon over ``sampler``, wired together (a bad rule file or secret raises here,
    before anything runs)."""
    engine = AlertEngine(parts.build_rules(config))
    targets = parts.build_targets(config)
    outbox = parts.open_outbox(config)
    hub = StreamHub(config.daemon.stream_queue)
    notify = Notifier(outbox, config.receivers, parts.external_url(config, port), config.alerts.resolve_grace)
    deliverer = Deliverer(outbox, targets, config.notify)
    pipeline = Pipeline(engine, hub, notify, on_queued=deliverer.wake.set)
    diagnosis = SharedDiagnosis(lambda: list(sampler.history), max(1.0, config.exporter.diagnosis_interval))
    collector = SnapshotCollector(lambda: pipeline.latest, lambda: pipeline.alerts,
                                  config.daemon.max_process_series, names=config.exporter.names,
                                  findings=lambda: diagnosis.findings,
                                  process_min_age=config.daemon.process_series_min_age)
    exporter = Exporter(collector)
    built = Parts(sampler, engine, outbox, hub, notify, deliverer, pipeline, diagnosis, collector, exporter)
    exporter.registry.register(DaemonSeries(built))
    sampler.observe_tick_duration(exporter.observe_tick)
    sampler.subscribe(collector.totals.observe)  # byte counters add up every Snapshot
    sampler.subscribe(pipeline.offer)
    built.efficiency = accounting.build(config, sampler, exporter)  # GPU-seconds by cause: efficiency/
    built.rollouts = rollouts.build(config, built.efficiency, outbox, notify)  # rides the accounting
    return built
